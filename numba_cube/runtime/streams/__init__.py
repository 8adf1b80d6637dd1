"""Ordering: stream identity, the hazard tracker that infers dependencies from the buffers a
launch binds (CONTRACT.md section 3), the host streams and their bounded worker pool, and the
channel through which work reaches the single-owner server (section 8).
"""

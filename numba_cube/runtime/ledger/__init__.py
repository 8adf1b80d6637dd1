"""Failures on buffers (CONTRACT.md section 4): the ledger and the execute scope, a failure's
record, the pending state of work whose outcome nobody checked yet, and where a failure goes
when no buffer can carry it.
"""

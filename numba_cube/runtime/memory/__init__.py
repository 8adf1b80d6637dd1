"""Buffers: handles and bindings, the memory pool and the server's memory table, borrowed
memory (another library's arrays), array layouts, and what makes a handle array-like.
"""

"""The backend runtime: the contract (protocol), the table of backends (registry) and how an
entry is loaded (factory), the worker process that isolates one, the timing loop, and thread
counts (threads)."""

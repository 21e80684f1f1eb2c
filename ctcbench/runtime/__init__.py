"""The backend runtime: the contract (protocol), the table of backends (registry), the worker
process that isolates one, the timing loop, and thread settings."""

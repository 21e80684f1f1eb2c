"""Run folders: the store every driver writes its rows into, its lock, and the run kinds."""

"""A module that fails when imported, as a module with a missing dependency does."""
raise RuntimeError("this module needs a GPU library that is not here")

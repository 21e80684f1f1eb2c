"""``ctcbench doctor``: what is wrong with a user's CTC tensors, ranked, with fixes."""
from ctcbench.doctor.decoder import check_decoder
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.monitor import Monitor

__all__ = ["Monitor", "check_decoder", "diagnose"]

"""``ctcbench doctor``: what is wrong with a user's CTC tensors, ranked, with fixes."""
from ctcbench.doctor.aligner import check_aligner
from ctcbench.doctor.decoder import check_decoder
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.monitor import Monitor

__all__ = ["Monitor", "check_aligner", "check_decoder", "diagnose"]

"""The project's own test, parametrised over ctcbench's case library by its fixture."""
import torch

from mypkg.ctc import ctc_loss


def test_our_loss_is_finite_where_the_library_says_it_is(ctc_case):
    p = ctc_case.problem
    if p.dtype not in ("float32", "float64") or p.blank % p.shape[2] != 0:
        return
    log_probs = torch.tensor(p.clean_logits(p.dtype)).log_softmax(-1)
    got = ctc_loss(log_probs, torch.tensor(p.targets, dtype=torch.long),
                   torch.tensor(p.input_lengths), torch.tensor(p.target_lengths)).numpy()
    finite = torch.isfinite(torch.tensor(ctc_case.loss)).numpy()
    assert torch.isfinite(torch.tensor(got[finite])).all()

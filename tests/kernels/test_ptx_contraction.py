"""``.ci/ptx_check.py`` also sees the multiply-adds that ptxas (PTX to machine code) may fuse: a
plain ``mul`` whose result a plain ``add``/``sub`` of the same width takes, in the kernels whose
products must stay unfused; ``mul.rn`` (``mul_rn``) and ``add.rn`` pairs are left alone. On PTX
text (the compile itself needs NVRTC/NVVM and runs in CI)."""

from tests.kernels.test_ptx_check import _ptx_check

FUSIBLE = """
    mul.f32     %f3, %f1, %f2;
    add.f32     %f4, %f0, %f3;
    mul.f64     %fd3, %fd1, %fd2;
    sub.f64     %fd4, %fd3, %fd0;
"""
SAFE = """
    mul.rn.f32  %f3, %f1, %f2;
    add.f32     %f4, %f0, %f3;
    mul.f32     %f5, %f1, %f2;
    add.rn.f32  %f6, %f5, %f0;
    setp.lt.f32 %p1, %f5, %f0;
    mul.f64     %fd3, %fd1, %fd2;
    add.f32     %f7, %f0, %f1;
"""


def test_plain_mul_add_pairs_are_counted_per_width():
    ptx_check = _ptx_check()
    assert ptx_check.contractible_pairs(FUSIBLE) == {"fma.rn.f32": 1, "fma.rn.f64": 1}
    assert not ptx_check.contractible_pairs(SAFE)


def test_a_pair_ptxas_may_fuse_breaks_the_unfused_rule():
    ptx_check = _ptx_check()
    (error,) = ptx_check.contraction_errors("tag", "step", FUSIBLE)
    assert "1 plain mul -> add/sub pair(s) that ptxas may fuse into fma.rn.f32" in error
    assert len(ptx_check.contraction_errors("tag", "reset", FUSIBLE)) == 2
    assert ptx_check.contraction_errors("tag", "step", SAFE) == []
    assert ptx_check.contraction_errors("pendulum", "step", FUSIBLE) == []  # no rule there

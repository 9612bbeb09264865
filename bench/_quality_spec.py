"""What the quality bench compares, shared by ``bench_quality.py`` (which runs it) and
``quality_summary.py`` (which tabulates its records) without importing the runner: the gpufs
families, the peers, and the goal's tolerance."""

#: The goal: a gpufs family is the best or within TOL of the best peer.
TOL = 0.005
GPUFS = ("gbfs", "controlburn", "stagewise")
PEERS = ("rf_topk", "lgbm_cegb", "l1", "sfm_lgbm_gain")

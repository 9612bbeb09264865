"""The engine, on either backend: binning (cut points, uint8 bins), quantize
(fixed-point gradients), objectives, penalties (who pays what), grower (one
tree, depth-wise, through a backend), tree (the tree and ensemble data model,
prediction, JSON), boosting (the boosting loop, selection record, early
stopping), multitask_boosting (multitask A-GBM) and group_testing (GT-GBM's
candidate search).
"""

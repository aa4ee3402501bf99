"""Pure readings of a TrainJob's pods that the operator and the cluster backend share: pods as steps with the
scheduler's and kubelet's reasons (``steps``), and why they failed (``failures``)."""

"""What-ifs: each answer made by changing the workload, capturing its step again and predicting it again.

- advise.py: the speed fixes (torch.compile, bf16 autocast, TF32, the fused optimizer, channels_last, a larger
  batch, a sync point removed), ranked by saving (`kernelcast advise`);
- memory_fixes.py: what would make a step that runs out of memory fit (`kernelcast predict`'s fixes);
- fit.py: the largest build() argument whose step fits (`kernelcast fit`);
- sweep.py: the step over a range of one argument (`kernelcast sweep`);
- transforms.py: the changes they share, each made inside the capture to what build() made.
"""

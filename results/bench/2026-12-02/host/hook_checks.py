"""What the hooks' input checks cost: RoPE-Mixed's per-layer angle lookup with the checks (tokens, block) against bare
indexing, recipe dims (dim 128, 4 heads, depth 6), 8 x 8 grid. Run: OMP_NUM_THREADS=1 python hook_checks.py"""

import timeit

import vitpe

pe = vitpe.pe.build("rope_mixed", dim=128, heads=4, depth=6, grid=(8, 8), num_prefix_tokens=0)
state = pe.prepare((8, 8))
n = 100_000
checked = min(timeit.repeat(lambda: pe._angles(state, 3, 64, "qkv"), number=n, repeat=5)) / n
bare = min(timeit.repeat(lambda: (state[0][3], state[1][3]), number=n, repeat=5)) / n
print(f"per layer: checked {checked * 1e6:.2f} us, bare {bare * 1e6:.2f} us; "
      f"per forward (6 layers): +{(checked - bare) * 6 * 1e6:.1f} us")

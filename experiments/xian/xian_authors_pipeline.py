#!/usr/bin/python3
"""A re-implementation (numpy/scipy only) of the DP fair post-processor of Xian et al. (2024) as
the authors' code runs it (github.com/rxian/fair-regression @ 1b51ad7: postprocess.py
PrivateHDEFairPostProcessor fit/predict, communities.ipynb cell "Results and baselines for
alpha = 0"), used to find out why our Communities numbers at eps <= 1 differ from theirs
(experiments/README.md, "How close, and the gap").

The only change from their code path is the step-5 solver: their cvxpy+Gurobi LP is replaced by
the exact alpha = 0 quantile solver (a port of core/postprocess/sp_couplings.cc
SolveCouplingsQuantile), which is the LP's unique optimum when the weighted mean bin index is
never a half-integer (true here: the weights are noisy or n = 1395 is odd).

  xian_authors_pipeline.py reproduce           # their rng (default_rng(seed)): their table
  xian_authors_pipeline.py draws R             # R other noise streams: the distribution
  xian_authors_pipeline.py vault a.csv b.csv…  # per-seed CSVs of xian_reproduction runs

Data: ../shared/datasets/communities/communities_uci.csv (override with $COMMUNITIES).
Needs Debian's python3-numpy and python3-scipy.
"""
import csv, math, os, sys
import numpy as np
from scipy.stats import ks_2samp

K, LO, HI = 12, 0.0, 1.0
WIDTH = (HI - LO) / K
CENTRES = LO + (np.arange(K) + 0.5) * WIDTH
EPSILONS = [np.inf, 10, 5, 1, 0.5, 0.1]
SEEDS = range(33, 83)
# communities.ipynb, stored output of the alpha = 0 cell ("binning + fair", "... (eps=E)").
AUTHORS_MSE = [0.018486, 0.018441, 0.018396, 0.018106, 0.017691, 0.015489]
AUTHORS_KS = [0.064075, 0.064352, 0.064654, 0.068496, 0.075991, 0.162784]


def load():
  path = os.environ.get('COMMUNITIES', os.path.join(
      os.path.dirname(os.path.abspath(__file__)), '../../shared/datasets/communities/communities_uci.csv'))
  with open(path) as f:
    rows = list(csv.reader(f))
  h = rows[0]
  y = np.array([float(r[h.index('ViolentCrimesPerPop')]) for r in rows[1:]])
  g = (np.array([float(r[h.index('racepctblack')]) for r in rows[1:]]) > 0.06).astype(int)
  return y, g


def split(n, seed):
  """sklearn train_test_split(test_size=0.3, random_state=seed), unstratified."""
  perm = np.random.RandomState(seed).permutation(n)
  n_test = math.ceil(0.3 * n)
  return perm[n_test:], perm[:n_test]


def to_bin(s):
  return np.clip(np.floor((s - LO) / WIDTH), 0, K - 1).astype(int)


def quantile_couplings(pmf, w):
  groups = pmf.shape[0]
  cdf = np.minimum(np.cumsum(pmf, axis=1), 1.0)
  cdf[:, -1] = 1.0
  gamma = np.zeros((groups, K, K))
  pos = [0] * groups
  u = 0.0
  while u < 1.0:
    nxt, wi = 1.0, 0.0
    for a in range(groups):
      while pos[a] < K - 1 and cdf[a][pos[a]] <= u:
        pos[a] += 1
      nxt = min(nxt, cdf[a][pos[a]])
      wi += w[a] * pos[a]
    target = min(max(int(math.floor(wi / w.sum() + 0.5)), 0), K - 1)
    for a in range(groups):
      gamma[a, pos[a], target] += nxt - u
    u = nxt
  return gamma


def fit(scores, groups, eps, rng, noise_kind='laplace'):
  """Their fit: histogram / n, Lap(2/(eps n)) per cell, w = max(row sum, 1e-6), L-inf isotonic
  CDF repair, clip, last = 1; then the transport rows gamma / row sum, identity for empty rows."""
  n, groups_n = len(scores), int(groups.max()) + 1
  b = to_bin(scores)
  hist = np.array([np.bincount(b[groups == a], minlength=K) for a in range(groups_n)], float) / n
  if noise_kind == 'laplace':
    hist = hist + rng.laplace(scale=2 / (eps * n), size=(groups_n, K))
  elif np.isfinite(eps):  # the vault's: discrete Laplace of scale 2/eps on the counts
    p = 1 - math.exp(-eps / 2)
    hist = hist + (rng.geometric(p, (groups_n, K)) - rng.geometric(p, (groups_n, K))) / n
  w = np.clip(hist.sum(axis=1), 1e-6, None)
  cdf = np.cumsum(hist / w[:, None], axis=1)
  cdf = (np.maximum.accumulate(cdf, axis=1) + np.minimum.accumulate(cdf[:, ::-1], axis=1)[:, ::-1]) / 2
  cdf = np.clip(cdf, 0, 1)
  cdf[:, -1] = 1
  gamma = quantile_couplings(np.diff(cdf, prepend=0, axis=1), w)
  rows = gamma.sum(axis=-1, keepdims=True)
  with np.errstate(invalid='ignore', divide='ignore'):
    g = np.where(rows > 0, gamma / rows, np.eye(K)[None])
  return g


def predict(g, scores, groups, rng):
  """Their predict: per (group, bin) in np.unique order, rng.choice over the transport row."""
  b = to_bin(scores)
  out = np.empty_like(b)
  for a in np.unique(groups):
    for i in np.unique(b[groups == a]):
      m = (b == i) & (groups == a)
      out[m] = rng.choice(K, size=int(m.sum()), p=g[a][i])
  return out * WIDTH + LO + WIDTH / 2


def expected_mse(g, y, groups):
  return float(np.mean(np.sum(g[groups, to_bin(y)] * (CENTRES[None, :] - y[:, None]) ** 2, axis=1)))


def run(y, grp, rng_for, noise_kind='laplace'):
  """50-seed means of (sampled MSE, KS, sampler-free MSE) per eps."""
  res = np.zeros((3, len(EPSILONS), len(SEEDS)))
  for si, seed in enumerate(SEEDS):
    tr, te = split(len(y), seed)
    for ei, eps in enumerate(EPSILONS):
      rng = rng_for(seed)  # as the notebook: one fresh generator per (seed, eps) fit
      g = fit(y[tr], grp[tr], eps, rng, noise_kind)
      out = predict(g, y[te], grp[te], rng)
      res[:, ei, si] = (np.mean((y[te] - out) ** 2),
                        ks_2samp(out[grp[te] == 0], out[grp[te] == 1]).statistic,
                        expected_mse(g, y[te], grp[te]))
  return res.mean(axis=2)


def main():
  y, grp = load()
  mode = sys.argv[1] if len(sys.argv) > 1 else 'reproduce'
  if mode == 'reproduce':
    m = run(y, grp, lambda s: np.random.default_rng(s))
    print('eps   | MSE (sampled) | authors | KS      | authors | MSE (sampler-free)')
    for ei, eps in enumerate(EPSILONS):
      print(f'{eps:<5} | {m[0, ei]:.6f}      | {AUTHORS_MSE[ei]:.6f} | {m[1, ei]:.6f} | '
            f'{AUTHORS_KS[ei]:.6f} | {m[2, ei]:.6f}')
  elif mode == 'draws':
    r_count = int(sys.argv[2])
    own = run(y, grp, lambda s: np.random.default_rng(s))[2]
    for kind in ('laplace', 'discrete'):
      m = np.array([run(y, grp, lambda s, r=r: np.random.default_rng([r, s, 7]), kind)[2]
                    for r in range(r_count)])
      print(f'{kind}: {r_count} noise streams, sampler-free 50-seed MSE mean / sd / '
            f'fraction at or below the authors\' own draw')
      for ei, eps in enumerate(EPSILONS):
        print(f'  eps={eps:<5} {m[:, ei].mean():.6f}  {m[:, ei].std(ddof=1):.6f}  '
              f'{np.mean(m[:, ei] <= own[ei]):.3f}  (own draw {own[ei]:.6f})')
      if kind == 'laplace':
        print('  correlation of the eps = 1, 0.5, 0.1 means across streams:',
              np.round(np.corrcoef(m[:, 3:].T)[np.triu_indices(3, 1)], 2))
  elif mode == 'vault':
    names = ['inf', '10', '5', '1', '0.5', '0.1']
    m = []
    for path in sys.argv[2:]:
      v = {e: [] for e in names}
      for row in csv.DictReader(open(path)):
        if row['dataset'] == 'communities' and row['method'] == 'fair':
          v[row['epsilon']].append((float(row['mse']), float(row['mse_expected']), float(row['ks'])))
      m.append([np.mean(v[e], axis=0) for e in names])
    m = np.array(m)  # runs x eps x (mse, expected, ks)
    print(f'{len(m)} vault runs: 50-seed means, mean over runs (run-to-run sd)')
    print('eps   | MSE sampled        | MSE sampler-free   | KS')
    for ei, e in enumerate(names):
      print(f'{e:<5} | {m[:, ei, 0].mean():.6f} ({m[:, ei, 0].std(ddof=1):.6f}) | '
            f'{m[:, ei, 1].mean():.6f} ({m[:, ei, 1].std(ddof=1):.6f}) | '
            f'{m[:, ei, 2].mean():.4f} ({m[:, ei, 2].std(ddof=1):.4f})')
  else:
    sys.exit(__doc__)


if __name__ == '__main__':
  main()

// Runs `strata logits` on one shared model and checks its dump against the exact reference, as
// ../shared/golden/README.md defines the comparison: the same tokens per case; over every
// reference top-20 entry that is also in our top-20, max_abs and mean_abs within the manifest
// tolerance, with at most 20% missing; the first greedy token equal to the reference's where the
// reference's top-1/top-2 gap exceeds twice the tolerance.
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [strata, shared, name] = process.argv.slice(2);
const out = join(mkdtempSync(join(tmpdir(), 'strata-logits-')), 'out.json');
execFileSync(strata, ['logits', '--model', `${shared}/models/${name}.gguf`, '--prompts', `${shared}/golden/prompts.txt`,
  '--top', '20', '--out', out], { stdio: 'inherit' });
const got = JSON.parse(readFileSync(out, 'utf8'));
const ref = JSON.parse(readFileSync(`${shared}/golden/${name}.ref.json`, 'utf8'));
const tol = JSON.parse(readFileSync(`${shared}/golden/manifest.json`, 'utf8')).models[name].tolerance;
const fail = (msg) => { console.error(`${name}: ${msg}`); process.exit(1); };

if (got.n_vocab !== ref.n_vocab) fail(`n_vocab ${got.n_vocab}, reference ${ref.n_vocab}`);
if (got.cases.length !== ref.cases.length) fail(`${got.cases.length} cases, reference ${ref.cases.length}`);
let worst = 0, sum = 0, compared = 0, missing = 0, worstLse = 0;
ref.cases.forEach((c, i) => {
  const g = got.cases[i];
  if (g.prompt !== c.prompt) fail(`case ${i}: prompt differs`);
  if (JSON.stringify(g.tokens) !== JSON.stringify(c.tokens)) fail(`case ${i}: tokens differ`);
  if (g.positions.length !== c.positions.length) fail(`case ${i}: ${g.positions.length} positions`);
  if (g.greedy.length !== 16) fail(`case ${i}: ${g.greedy.length} greedy tokens`);
  c.positions.forEach((p, j) => {
    const mineTop = g.positions[j].top;
    if (mineTop.length !== 20) fail(`case ${i} position ${j}: ${mineTop.length} top entries`);
    const mine = new Map(mineTop.map(([t, l]) => [t, l]));
    for (const [t, l] of p.top) {
      if (!mine.has(t)) { ++missing; continue; }
      const d = Math.abs(mine.get(t) - l);
      worst = Math.max(worst, d); sum += d; ++compared;
    }
    worstLse = Math.max(worstLse, Math.abs(g.positions[j].logsumexp - p.logsumexp));
  });
  const last = c.positions[c.positions.length - 1].top;
  if (last[0][1] - last[1][1] > 2 * tol.max_abs && g.greedy[0] !== c.greedy[0])
    fail(`case ${i}: first greedy token ${g.greedy[0]}, reference ${c.greedy[0]}`);
});
const mean = sum / Math.max(1, compared), missingShare = missing / Math.max(1, missing + compared);
console.log(`${name}: max_abs ${worst.toFixed(6)} mean_abs ${mean.toFixed(7)} missing ${(100 * missingShare).toFixed(1)}% ` +
  `logsumexp ${worstLse.toFixed(6)} (tolerance ${tol.max_abs} / ${tol.mean_abs})`);
if (compared === 0) fail('nothing compared');
if (worst > tol.max_abs || mean > tol.mean_abs || missingShare > 0.2 || worstLse > 10 * tol.max_abs) process.exit(1);

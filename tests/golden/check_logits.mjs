// Runs `strata logits` on one shared model and checks its dump against the exact reference:
// the same tokens per case, and every reference top-20 logit within the manifest tolerance.
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
let worst = 0;
if (got.n_vocab !== ref.n_vocab || got.cases.length !== ref.cases.length) throw new Error('shape differs');
ref.cases.forEach((c, i) => {
  const g = got.cases[i];
  if (JSON.stringify(g.tokens) !== JSON.stringify(c.tokens)) throw new Error(`case ${i}: tokens differ`);
  if (g.greedy.length !== 16) throw new Error(`case ${i}: ${g.greedy.length} greedy tokens`);
  c.positions.forEach((p, j) => {
    const mine = new Map(g.positions[j].top.map(([t, l]) => [t, l]));
    for (const [t, l] of p.top) if (mine.has(t)) worst = Math.max(worst, Math.abs(mine.get(t) - l));
  });
});
console.log(`${name}: max_abs ${worst} (tolerance ${tol.max_abs})`);
if (worst > tol.max_abs) process.exit(1);

// Runs `strata chat-template` on every case of ../shared/templates/expected.json: the rendering
// must equal the reference byte for byte on stdout (exit 0), and a case the reference raised on
// must exit 1 with exactly the template's message on stderr and nothing on stdout.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [strata, shared] = process.argv.slice(2);
const expected = JSON.parse(readFileSync(`${shared}/templates/expected.json`, 'utf8'));
const dir = mkdtempSync(join(tmpdir(), 'strata-chat-template-'));
for (const [name, messages] of Object.entries(expected.conversations)) {
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(messages));
}
let passed = 0, failed = 0;
for (const [template, entry] of Object.entries(expected.templates)) {
  for (const [key, c] of Object.entries(entry.cases)) {
    const [conversation, gen] = key.split('|');
    const args = ['chat-template', '--template', `${shared}/templates/${template}`,
      '--messages', join(dir, `${conversation}.json`), '--bos', expected.bos_token, '--eos', expected.eos_token,
      '--date', expected.strftime_now];
    if (gen === 'gen') args.push('--add-generation-prompt');
    const r = spawnSync(strata, args);
    const ok = c.ok
      ? r.status === 0 && r.stdout.equals(Buffer.from(c.text, 'utf8'))
      : r.status === 1 && r.stdout.length === 0 && r.stderr.toString('utf8').trim() === c.error;
    if (ok) ++passed;
    else {
      ++failed;
      console.error(`${template} ${key}: exit ${r.status}, stderr ${r.stderr.toString('utf8').slice(0, 200)}`);
    }
  }
}
console.log(`${passed} of ${passed + failed} cases match`);
process.exit(failed === 0 && passed === 80 ? 0 : 1);

// tests/server/replicas.mjs — conversations through HAProxy in front of two
// `petrel serve` replicas sharing one --kv-dir (deploy/haproxy.cfg), with the
// official openai npm client. Usage:
//   node replicas.mjs --lb URL --ref URL --api-key KEY --model ID
//                     --r1-pid PID --r2-pid PID
// --lb: the balancer's /v1 URL; --ref: a separate server's /v1 URL used as
// the reference (each turn-2 request sent there cold, without the kept
// states of the replicas). The balancer names the replica that answered in
// X-Petrel-Replica (r1 or r2).
// 1. Six conversations start at once, five keyed by the X-Petrel-Conversation
//    header, one by the `user` field only.
//    A `user` key routes as the same header key does.
// 2. The replica that holds conversation 0 is killed (SIGKILL).
// 3. Every conversation sends its second turn, concurrently: each must get
//    the reference's greedy reply; those whose replica died must land on the
//    survivor and reuse their first turn from the shared directory
//    (cached_tokens >= the first turn's prompt); the others stay where they were.
// Prints one line per check; exits 1 if any failed.
import OpenAI from 'openai';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
for (const k of ['lb', 'ref', 'api-key', 'model', 'r1-pid', 'r2-pid'])
  if (!args[k]) {
    console.error('usage: node replicas.mjs --lb URL --ref URL --api-key KEY --model ID --r1-pid PID --r2-pid PID');
    process.exit(2);
  }
const model = args.model;
const apiKey = args['api-key'];
const pids = { r1: Number(args['r1-pid']), r2: Number(args['r2-pid']) };

let failed = 0, n = 0;
function check(cond, what, detail) {
  n++;
  if (cond) console.log(`ok ${n} - ${what}`);
  else {
    failed++;
    console.log(`not ok ${n} - ${what}${detail !== undefined ? ': ' + JSON.stringify(detail) : ''}`);
  }
}

// Each conversation has its own client: the header is a default header, as
// a real application would set it once per session.
const words = ['Albatross', 'Puffin', 'Gannet', 'Shearwater', 'Fulmar', 'Kittiwake'];
const convs = words.map((w, i) => {
  const byUser = i === words.length - 1;
  const opts = { baseURL: args.lb, apiKey, maxRetries: 0, timeout: 60000 };
  if (!byUser) opts.defaultHeaders = { 'X-Petrel-Conversation': `conversation-${i}` };
  return {
    name: byUser ? 'user=alice' : `conversation-${i}`,
    byUser,
    client: new OpenAI(opts),
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: `${w} facts, please.` },
    ],
  };
});
const ref = new OpenAI({ baseURL: args.ref, apiKey, maxRetries: 0, timeout: 60000 });

async function turn(c) {
  const body = { model, messages: c.messages, max_tokens: 8, temperature: 0 };
  if (c.byUser) body.user = 'alice';
  const { data, response } = await c.client.chat.completions.create(body).withResponse();
  return { reply: data.choices[0].message.content, usage: data.usage, replica: response.headers.get('x-petrel-replica') };
}

try {
  // Turn 1, all at once.
  const t1 = await Promise.all(convs.map(turn));
  convs.forEach((c, i) => {
    c.t1 = t1[i];
    check(['r1', 'r2'].includes(t1[i].replica), `${c.name}: turn 1 answered by a replica`, t1[i].replica);
  });
  const on = (r) => convs.filter((c) => c.t1.replica === r).length;
  check(on('r1') > 0 && on('r2') > 0, 'conversations spread over both replicas', { r1: on('r1'), r2: on('r2') });
  // The user-keyed conversation sticks to its replica too (two repeats; the
  // check below shows that this is the key's doing, not chance).
  const u = convs[convs.length - 1];
  for (let k = 0; k < 2; k++) {
    const again = await turn(u);
    check(again.replica === u.t1.replica && again.reply === u.t1.reply, `user field: same replica, same reply (${k + 1})`,
          [u.t1.replica, again.replica]);
  }

  // The `user` field is hashed as the header is (the balancer copies it into
  // the header): eight keys sent both ways land on the same replicas. With
  // no key the balancer would spread them regardless of the key.
  const plain = new OpenAI({ baseURL: args.lb, apiKey, maxRetries: 0, timeout: 60000 });
  const byHdr = [], byUser = [];
  for (let k = 0; k < 8; k++) {
    const body = { model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 };
    const h = await plain.chat.completions.create(body, { headers: { 'X-Petrel-Conversation': `key-${k}` } }).withResponse();
    const b = await plain.chat.completions.create({ ...body, user: `key-${k}` }).withResponse();
    byHdr.push(h.response.headers.get('x-petrel-replica'));
    byUser.push(b.response.headers.get('x-petrel-replica'));
  }
  check(byHdr.join() === byUser.join() && new Set(byHdr).size === 2, 'user field routes as the same header',
        { byHdr, byUser });

  // Kill the replica that holds conversation 0.
  const dead = convs[0].t1.replica;
  const alive = dead === 'r1' ? 'r2' : 'r1';
  process.kill(pids[dead], 'SIGKILL');
  console.log(`# killed ${dead} (pid ${pids[dead]}); ${alive} survives`);

  for (const c of convs)
    c.messages.push({ role: 'assistant', content: c.t1.reply }, { role: 'user', content: 'And one more?' });
  // The reference: each second turn computed on the separate server.
  const want = [];
  for (const c of convs) {
    const r = await ref.chat.completions.create({ model, messages: c.messages, max_tokens: 8, temperature: 0 });
    want.push(r.choices[0].message.content);
  }
  // Turn 2, all at once, through the balancer.
  const t2 = await Promise.all(convs.map(turn));
  convs.forEach((c, i) => {
    const r = t2[i];
    const moved = c.t1.replica === dead;
    check(r.reply === want[i], `${c.name}: turn 2 equals the uninterrupted reply`, [r.reply, want[i]]);
    check(r.replica === alive, `${c.name}: turn 2 on the surviving replica${moved ? ' (moved)' : ''}`, r.replica);
    check(r.usage.prompt_tokens_details.cached_tokens >= c.t1.usage.prompt_tokens,
          `${c.name}: turn 1 reused${moved ? ' from the shared --kv-dir' : ''} (cached ${r.usage.prompt_tokens_details.cached_tokens} of ${r.usage.prompt_tokens}, turn 1 prompt ${c.t1.usage.prompt_tokens})`,
          r.usage);
  });
} catch (e) {
  failed++;
  console.log(`not ok - threw: ${e && e.stack ? e.stack : e}`);
}
console.log(failed ? `FAILED ${failed} of ${n}` : `PASSED ${n} checks`);
process.exit(failed ? 1 : 0);

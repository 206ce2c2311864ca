// tests/server/run.mjs — drives a running `petrel serve` with the official
// openai npm client. Usage:
//   node run.mjs --base-url http://127.0.0.1:PORT/v1 --api-key KEY --model ID
// The server must run with that API key, a tokenizer + chat template in its
// model, and a small --max-queue (the overflow test expects 429s).
// Prints one line per check; exits 1 if any failed.
import OpenAI from 'openai';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const baseURL = args['base-url'];
const apiKey = args['api-key'];
const model = args['model'];
if (!baseURL || !apiKey || !model) {
  console.error('usage: node run.mjs --base-url URL --api-key KEY --model ID');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Tell me about petrels, the sea birds.' },
];

let failed = 0;
let n = 0;
function check(cond, what, detail) {
  n++;
  if (cond) console.log(`ok ${n} - ${what}`);
  else {
    failed++;
    console.log(`not ok ${n} - ${what}${detail !== undefined ? ': ' + JSON.stringify(detail) : ''}`);
  }
}
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    failed++;
    console.log(`not ok - ${name} threw: ${e && e.stack ? e.stack : e}`);
  }
}

async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '', role = null, finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    check(c.object === 'chat.completion.chunk', 'chunk object type', c.object);
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) role = ch.delta.role;
      if (ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, role, finish, usage, chunks };
}

let greedy = '';
await step('models', async () => {
  const list = await client.models.list();
  check(list.data.some((m) => m.id === model), 'GET /v1/models lists the model', list.data);
});

await step('chat non-streaming', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  const c = r.choices[0];
  check(r.object === 'chat.completion', 'chat.completion object', r.object);
  check(c.message.role === 'assistant' && typeof c.message.content === 'string', 'assistant message', c.message);
  check(['length', 'stop'].includes(c.finish_reason), 'finish_reason', c.finish_reason);
  check(r.usage.prompt_tokens > 0 && r.usage.completion_tokens <= 16 &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'usage', r.usage);
  greedy = c.message.content;
  check(greedy.length > 0, 'non-empty greedy reply', greedy);
  const again = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  check(again.choices[0].message.content === greedy, 'greedy is deterministic', again.choices[0].message.content);
  check(again.usage.prompt_tokens_details.cached_tokens > 0, 'repeated prompt reuses the kept state', again.usage);
});

await step('chat streaming', async () => {
  const s = await streamChat({ model, messages, max_tokens: 16, temperature: 0, stream_options: { include_usage: true } });
  check(s.role === 'assistant', 'first delta carries the role', s.role);
  check(s.text === greedy, 'streamed text equals the non-streamed reply', [s.text, greedy]);
  check(['length', 'stop'].includes(s.finish), 'final chunk has finish_reason', s.finish);
  check(s.usage && s.usage.completion_tokens > 0, 'usage chunk with include_usage', s.usage);
  const t = await streamChat({ model, messages, max_tokens: 4, temperature: 0 });
  check(t.usage === null, 'no usage chunk without include_usage', t.usage);
});

await step('completions', async () => {
  const prompt = 'The petrel flies over the';
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0 });
  check(r.object === 'text_completion' && typeof r.choices[0].text === 'string', 'text_completion', r);
  check(r.usage.completion_tokens <= 12, 'completion usage', r.usage);
  const s = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, stream: true });
  let text = '', finish = null;
  for await (const c of s) {
    text += c.choices[0]?.text ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  check(text === r.choices[0].text, 'streamed completion equals the plain one', [text, r.choices[0].text]);
  check(finish === r.choices[0].finish_reason, 'same finish_reason', [finish, r.choices[0].finish_reason]);
  const ids = await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 3, temperature: 0 });
  check(ids.usage.prompt_tokens === 4, 'token-id prompt', ids.usage);
});

await step('stop sequences', async () => {
  // A stop string taken from the middle of the greedy reply: the reply
  // must end right before its first occurrence.
  let at = -1;
  for (let i = 3; i + 2 <= greedy.length; i++)
    if (/^[A-Za-z]{2}$/.test(greedy.slice(i, i + 2))) { at = i; break; }
  if (at < 0) at = Math.floor(greedy.length / 2);
  const stop = greedy.slice(at, at + 2);
  const want = greedy.slice(0, greedy.indexOf(stop));
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stop });
  check(r.choices[0].message.content === want, 'reply cut before the stop string', [r.choices[0].message.content, want, stop]);
  check(r.choices[0].finish_reason === 'stop', "finish_reason 'stop'", r.choices[0].finish_reason);
  const s = await streamChat({ model, messages, max_tokens: 16, temperature: 0, stop: ['zzzzzz', stop] });
  check(s.text === want, 'streamed reply cut before the stop string (list form)', [s.text, want]);
  check(s.finish === 'stop', 'streamed finish_reason stop', s.finish);
});

await step('max_tokens', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0 });
  const u = r.usage.completion_tokens;
  check(u <= 3 && (r.choices[0].finish_reason !== 'length' || u === 3), 'max_tokens bounds the reply', r.usage);
  const m = await client.chat.completions.create({ model, messages, max_completion_tokens: 2, temperature: 0 });
  check(m.usage.completion_tokens <= 2, 'max_completion_tokens bounds the reply', m.usage);
  const sampled = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0.8, top_p: 0.9, seed: 7,
                                                         presence_penalty: 0.5, frequency_penalty: 0.5 });
  const same = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0.8, top_p: 0.9, seed: 7,
                                                      presence_penalty: 0.5, frequency_penalty: 0.5 });
  check(sampled.choices[0].message.content === same.choices[0].message.content, 'same seed, same sample',
        [sampled.choices[0].message.content, same.choices[0].message.content]);
});

await step('logprobs', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs?.content ?? [];
  check(lp.length === r.usage.completion_tokens, 'one logprobs entry per token', lp.length);
  check(lp.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob),
        'logprobs and sorted alternatives', lp);
  check(lp.every((e) => e.logprob === e.top_logprobs[0].logprob), 'greedy token is the top alternative', lp);
});

await step('wrong API key', async () => {
  const bad = new OpenAI({ baseURL, apiKey: apiKey + 'x', maxRetries: 0 });
  try {
    await bad.chat.completions.create({ model, messages, max_tokens: 2 });
    check(false, 'wrong API key rejected');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'wrong API key -> 401', e.status);
  }
});

await step('unknown model', async () => {
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 });
    check(false, 'unknown model rejected');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.status === 404, 'unknown model -> 404', e.status);
  }
});

await step('bad request', async () => {
  try {
    await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 'warm' });
    check(false, 'wrong field type rejected');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature', 'wrong type -> 400', e.status);
  }
});

await step('queue overflow', async () => {
  const N = 10;
  const all = await Promise.allSettled(Array.from({ length: N }, (_, i) =>
    client.chat.completions.create({ model, messages: [{ role: 'user', content: `request ${i}` }], max_tokens: 16, temperature: 0 })));
  const ok = all.filter((r) => r.status === 'fulfilled').length;
  const limited = all.filter((r) => r.status === 'rejected' && r.reason?.status === 429).length;
  const other = all.filter((r) => r.status === 'rejected' && r.reason?.status !== 429).map((r) => String(r.reason));
  check(ok >= 1 && limited >= 1 && other.length === 0, 'requests beyond the queue get 429, the rest complete', { ok, limited, other });
  const after = await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0 });
  check(after.choices.length === 1, 'server still serves after the overflow');
});

await step('abort mid-stream', async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0, stream: true },
                                                       { signal: ac.signal });
  let got = 0;
  try {
    for await (const c of stream) {
      if (c.choices[0]?.delta?.content && ++got >= 2) ac.abort();
    }
  } catch (e) { /* aborted */ }
  const after = await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0 });
  check(after.choices.length === 1, 'server serves after a client abort');
});

console.log(failed ? `FAILED ${failed} of ${n}` : `PASSED ${n} checks`);
process.exit(failed ? 1 : 0);

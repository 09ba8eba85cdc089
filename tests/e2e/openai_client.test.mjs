// End-to-end tests of `strata serve` driven by the official `openai` npm client: completions,
// chat, streaming with usage, n > 1, logprobs, stop strings, errors, stories260K's greedy
// output over the API against the golden file, and tool_choice required/named on stories260K.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { sharedData, sourceDir, startServer } from './server.mjs';

const API_KEY = 'e2e-secret';

describe('strata serve with the openai client (tiny dummy model)', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer([
      path.join(sourceDir, 'models/strata-tiny'), '--load-format', 'dummy',
      '--kv-cache-memory', '32MiB', '--max-model-len', '512', '--threads', '1',
      '--served-model-name', 'tiny', '--api-key', API_KEY,
    ]);
    client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: API_KEY,
                          maxRetries: 0 });
  });
  after(async () => {
    if (server) assert.equal(await server.stop(), 0, 'graceful exit code');
  });

  const greedy = { model: 'tiny', temperature: 0, ignore_eos: true };

  test('models.list reports the served name, root and max_model_len', async () => {
    const models = await client.models.list();
    assert.equal(models.data.length, 1);
    assert.equal(models.data[0].id, 'tiny');
    assert.equal(models.data[0].object, 'model');
    assert.equal(models.data[0].max_model_len, 512);
    assert.match(models.data[0].root, /strata-tiny$/);
  });

  test('completion: shape, usage and finish_reason', async () => {
    const r = await client.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 8 });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.model, 'tiny');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].index, 0);
    assert.equal(typeof r.choices[0].text, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.deepEqual(r.usage, { prompt_tokens: 6, completion_tokens: 8, total_tokens: 14 });
  });

  test('streamed completion with include_usage equals the plain one', async () => {
    const plain = await client.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 12 });
    const stream = await client.completions.create({
      ...greedy, prompt: 'Hello', max_tokens: 12, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage = null;
    let finish = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.choices.length === 0) {
        usage = chunk.usage;
        continue;
      }
      assert.equal(chunk.usage, null);
      text += chunk.choices[0].text;
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    assert.ok(chunks >= 2);
    assert.equal(text, plain.choices[0].text);
    assert.equal(finish, 'length');
    assert.deepEqual(usage, { prompt_tokens: 6, completion_tokens: 12, total_tokens: 18 });
  });

  test('n > 1 gives numbered choices; seeded sampling is reproducible', async () => {
    const args = { model: 'tiny', prompt: 'Once', max_tokens: 10, n: 3, seed: 123,
                   temperature: 1.0, ignore_eos: true };
    const a = await client.completions.create(args);
    const b = await client.completions.create(args);
    assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
    assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
    assert.equal(a.usage.completion_tokens, 30);
    // Streamed: every choice index appears and finishes.
    const stream = await client.completions.create({ ...args, stream: true });
    const texts = ['', '', ''];
    const finished = new Set();
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finished.add(c.index);
      }
    }
    assert.deepEqual(texts, a.choices.map((c) => c.text));
    assert.equal(finished.size, 3);
  });

  test('completion logprobs and echo', async () => {
    const r = await client.completions.create({ ...greedy, prompt: 'Hi', max_tokens: 5,
                                                logprobs: 3, echo: true });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 3 + 5); // BOS + "Hi" + 5 generated
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    for (let i = 1; i < lp.tokens.length; i++) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const n = Object.keys(lp.top_logprobs[i]).length;
      assert.ok(n >= 1 && n <= 4, `top_logprobs size ${n}`);
    }
    assert.equal(lp.text_offset.length, lp.tokens.length);
    assert.ok(r.choices[0].text.startsWith('Hi'));
  });

  test('stop strings end the text without leaking, also when streamed', async () => {
    const full = (await client.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 40 }))
      .choices[0].text;
    const chars = [...full];
    assert.ok(chars.length > 10);
    const stop = chars.slice(6, 9).join('');
    const expected = full.slice(0, full.indexOf(stop));
    const r = await client.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 40, stop: [stop] });
    assert.equal(r.choices[0].text, expected);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, stop);
    const stream = await client.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 40,
                                                     stop, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, expected);
  });

  test('chat completion, streamed chat with usage, chat logprobs', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' },
                      { role: 'user', content: [{ type: 'text', text: 'Hi' }] }];
    const r = await client.chat.completions.create({ ...greedy, messages, max_tokens: 6 });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 6);
    // The prompt is the rendered template: <|system|>Be brief.<|eos|><|user|>Hi<|eos|><|assistant|>
    assert.equal(r.usage.prompt_tokens, 1 + 9 + 1 + 1 + 2 + 1 + 1);

    const stream = await client.chat.completions.create({
      ...greedy, messages, max_tokens: 6, stream: true, stream_options: { include_usage: true },
    });
    let content = '';
    let role = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.choices.length === 0) { usage = chunk.usage; continue; }
      const d = chunk.choices[0].delta;
      if (d.role) role = d.role;
      content += d.content ?? '';
    }
    assert.equal(role, 'assistant');
    assert.equal(content, r.choices[0].message.content);
    assert.equal(usage.completion_tokens, 6);

    const lp = await client.chat.completions.create({ ...greedy, messages, max_tokens: 3,
                                                      logprobs: true, top_logprobs: 2 });
    const entries = lp.choices[0].logprobs.content;
    assert.equal(entries.length, 3);
    for (const e of entries) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.ok(Array.isArray(e.bytes));
      assert.equal(e.top_logprobs.length, 2);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
      assert.ok(e.logprob >= e.top_logprobs[0].logprob - 1e-6, 'greedy picks the most likely token');
    }
  });

  test('errors come back as the client\'s typed errors', async () => {
    await assert.rejects(
      client.completions.create({ model: 'nope', prompt: 'x', max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /nope/.test(e.message));
    await assert.rejects(
      client.completions.create({ model: 'tiny', prompt: 'x', temperature: -1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 &&
             /temperature/.test(e.message) && e.param === 'temperature');
    await assert.rejects(
      client.completions.create({ model: 'tiny', prompt: 'x'.repeat(600) }),
      (e) => e instanceof OpenAI.BadRequestError && /maximum context length is 512/.test(e.message));
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny', messages: [] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
    const wrongKey = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'bad',
                                  maxRetries: 0 });
    await assert.rejects(wrongKey.models.list(),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    // The server keeps serving.
    const ok = await client.completions.create({ ...greedy, prompt: 'x', max_tokens: 2 });
    assert.equal(ok.usage.completion_tokens, 2);
  });
});

describe('stories260K greedy output over the API', () => {
  const goldenPath = path.join(sharedData, 'golden/stories260K.json');
  const modelDir = path.join(sharedData, 'models/stories260K-hf');
  let server;
  let client;
  before(async () => {
    assert.ok(fs.existsSync(goldenPath), `missing shared test data ${goldenPath}`);
    server = await startServer([modelDir, '--kv-cache-memory', '8MiB', '--threads', '1',
                                '--served-model-name', 'stories']);
    client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused',
                          maxRetries: 0 });
  });
  after(async () => {
    if (server) assert.equal(await server.stop(), 0);
  });

  test('equals the golden token ids and text', async () => {
    const golden = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));
    for (const c of golden.cases) {
      const r = await client.completions.create({
        model: 'stories', prompt: c.prompt, max_tokens: c.generated_ids.length, temperature: 0,
        ignore_eos: true, logprobs: 0, return_tokens_as_token_ids: true,
      });
      const ids = r.choices[0].logprobs.tokens.map((t) => Number(t.replace(/^token_id:/, '')));
      assert.deepEqual(ids, c.generated_ids, `prompt ${JSON.stringify(c.prompt)}`);
      assert.equal(r.usage.prompt_tokens, c.prompt_ids.length);
      // An empty prompt's continuation is the whole text, whose first SentencePiece space a
      // detokenizer drops ("text"); other continuations keep it ("completion_text").
      assert.equal(r.choices[0].text, c.prompt === '' ? c.text : c.completion_text);
    }
  });
});

// Tool calls forced by tool_choice on stories260K (a model that cannot choose tools): the server
// constrains the output with a schema built from the tools and returns tool_calls, which the
// client's own stream helper assembles from the deltas.
describe('tool_choice required and named on stories260K', () => {
  const modelDir = path.join(sharedData, 'models/stories260K-hf');
  let server;
  let client;
  const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
      parameters: { type: 'object', properties: {
        city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'], additionalProperties: false } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
      properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'],
      additionalProperties: false } } },
  ];
  const base = { model: 'stories', tools, temperature: 1, seed: 7, max_tokens: 200,
                 messages: [{ role: 'user', content: 'Once upon a time' }] };
  const checkCall = (call) => {
    assert.equal(call.type, 'function');
    assert.ok(call.id.length > 0);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') {
      assert.deepEqual(Object.keys(args).sort(), ['city', 'days']);
      assert.equal(typeof args.city, 'string');
      assert.ok([...args.city].length <= 10, args.city);
      assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, `${args.days}`);
    } else {
      assert.equal(call.function.name, 'get_time');
      assert.deepEqual(Object.keys(args), ['tz']);
      assert.ok(['UTC', 'CET'].includes(args.tz), args.tz);
    }
  };
  before(async () => {
    server = await startServer([modelDir, '--kv-cache-memory', '8MiB', '--threads', '1',
                                '--served-model-name', 'stories', '--chat-template',
                                "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"]);
    client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'unused',
                          maxRetries: 0 });
  });
  after(async () => {
    if (server) assert.equal(await server.stop(), 0);
  });

  test('required: valid calls, body and stream', async () => {
    const r = await client.chat.completions.create({ ...base, tool_choice: 'required' });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(r.choices[0].message.content, null);
    assert.ok(r.choices[0].message.tool_calls.length >= 1);
    r.choices[0].message.tool_calls.forEach(checkCall);
    const stream = client.chat.completions.stream({ ...base, tool_choice: 'required',
                                                    parallel_tool_calls: false });
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(final.choices[0].message.tool_calls.length, 1);
    final.choices[0].message.tool_calls.forEach(checkCall);
  });

  test('named: one call of that function, body and stream', async () => {
    const choice = { type: 'function', function: { name: 'get_weather' } };
    const r = await client.chat.completions.create({ ...base, tool_choice: choice });
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_weather');
    checkCall(r.choices[0].message.tool_calls[0]);
    const final = await client.chat.completions
      .stream({ ...base, tool_choice: choice }).finalChatCompletion();
    assert.equal(final.choices[0].message.tool_calls.length, 1);
    checkCall(final.choices[0].message.tool_calls[0]);
  });

  test('auto without --enable-auto-tool-choice is a 400 naming tool_choice', async () => {
    await assert.rejects(client.chat.completions.create({ ...base }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /--enable-auto-tool-choice/);
      return true;
    });
  });
});

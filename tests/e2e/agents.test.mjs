// Agents end to end on stories260K (a model that cannot choose tools or write JSON by itself, so
// the constraints do all the work), with real clients: the openai npm client with tools and
// tool_choice "required" (streamed and not) and response_format json_schema; the Vercel AI SDK's
// generateObject (zod schema), generateText and streamText with tools. Every output parses and
// validates against its schema with ajv.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, jsonSchema, streamText, tool } from 'ai';
import { z } from 'zod';
import { sharedData, sourceDir, startServer } from './server.mjs';

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

const weather = {
  type: 'object',
  properties: {
    location: { type: 'string', maxLength: 40 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 14 },
  },
  required: ['location', 'unit'],
  additionalProperties: false,
};
const search = {
  type: 'object',
  properties: { query: { type: 'string', maxLength: 60 }, limit: { type: 'integer', minimum: 1, maximum: 10 } },
  required: ['query'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters: weather } },
  { type: 'function', function: { name: 'search', description: 'Web search', parameters: search } },
];
const schemaOf = { get_weather: weather, search };

function assertValid(schema, value, what) {
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${what}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
}

function assertToolCalls(calls, what) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, `${what}: no tool calls`);
  for (const call of calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /\S/);
    assert.ok(call.function.name in schemaOf, `${what}: unknown tool ${call.function.name}`);
    assertValid(schemaOf[call.function.name], JSON.parse(call.function.arguments), what);
  }
}

describe('agents on stories260K with real clients', () => {
  let server;
  let client;
  let provider;
  before(async () => {
    server = await startServer([
      path.join(sharedData, 'models/stories260K-hf'), '--kv-cache-memory', '32MiB',
      '--threads', '1', '--served-model-name', 'stories',
      '--chat-template', path.join(sourceDir, 'tests/e2e/fixtures/tools_chat_template.jinja'),
      '--enable-auto-tool-choice', '--tool-call-parser', 'hermes',
    ]);
    const baseURL = `http://127.0.0.1:${server.port}/v1`;
    client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0 });
    provider = createOpenAICompatible({ name: 'strata', baseURL, supportsStructuredOutputs: true });
  });
  after(async () => {
    if (server) assert.equal(await server.stop(), 0, 'graceful exit code');
  });

  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

  test('openai client: tool_choice required, not streamed', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: 'stories', messages, tools, tool_choice: 'required', temperature: 1, seed,
        max_tokens: 200,
      });
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      assertToolCalls(r.choices[0].message.tool_calls, `seed ${seed}`);
    }
  });

  test('openai client: tool_choice required and a named function, streamed', async () => {
    for (const choice of ['required', { type: 'function', function: { name: 'search' } }]) {
      const stream = await client.chat.completions.create({
        model: 'stories', messages, tools, tool_choice: choice, temperature: 1, seed: 7,
        max_tokens: 200, stream: true,
      });
      const calls = [];
      let finish = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        if (c.finish_reason) finish = c.finish_reason;
        for (const d of c.delta?.tool_calls ?? []) {
          if (!calls[d.index]) {
            assert.ok(d.id && d.function?.name, 'the first delta of a call has its id and name');
            calls[d.index] = { id: d.id, type: 'function', function: { name: d.function.name, arguments: '' } };
          }
          calls[d.index].function.arguments += d.function?.arguments ?? '';
        }
      }
      assertToolCalls(calls, JSON.stringify(choice));
      if (typeof choice === 'object') assert.ok(calls.every((c) => c.function.name === 'search'));
      assert.equal(finish, typeof choice === 'object' ? 'stop' : 'tool_calls');
    }
  });

  test('openai client: response_format json_schema', async () => {
    for (const stream of [false, true]) {
      const req = {
        model: 'stories', messages, temperature: 1, seed: 11, max_tokens: 200,
        response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather, strict: true } },
      };
      let text = '';
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
          text += chunk.choices[0]?.delta?.content ?? '';
        }
      } else {
        text = (await client.chat.completions.create(req)).choices[0].message.content;
      }
      assertValid(weather, JSON.parse(text), `stream ${stream}`);
    }
  });

  test('Vercel AI SDK: generateObject with a zod schema', async () => {
    const schema = z.object({
      name: z.string().max(20),
      age: z.number().int().min(0).max(120),
      pets: z.array(z.enum(['cat', 'dog'])).max(3),
    });
    for (const seed of [1, 2]) {
      const { object } = await generateObject({
        model: provider('stories'), schema, prompt: 'Describe Lily.', temperature: 1, seed,
        maxOutputTokens: 200,
      });
      assert.ok(schema.safeParse(object).success, JSON.stringify(object));
    }
  });

  test('Vercel AI SDK: generateText and streamText with tools', async () => {
    const aiTools = {
      get_weather: tool({ description: 'Weather forecast', inputSchema: jsonSchema(weather) }),
      search: tool({ description: 'Web search', inputSchema: jsonSchema(search) }),
    };
    const r = await generateText({
      model: provider('stories'), tools: aiTools, toolChoice: 'required', prompt: 'Weather in Rome?',
      temperature: 1, seed: 5, maxOutputTokens: 200,
    });
    assert.ok(r.toolCalls.length >= 1, 'generateText made a tool call');
    for (const c of r.toolCalls) assertValid(schemaOf[c.toolName], c.input, 'generateText');
    const s = streamText({
      model: provider('stories'), tools: aiTools, toolChoice: 'required', prompt: 'Find cats.',
      temperature: 1, seed: 6, maxOutputTokens: 200,
    });
    const calls = await s.toolCalls;
    assert.ok(calls.length >= 1, 'streamText made a tool call');
    for (const c of calls) assertValid(schemaOf[c.toolName], c.input, 'streamText');
  });
});

// setup.mjs - models and a server for the Anthropic tests. Two generated
// random-weight models share one models dir:
//   org/tiny  - lib/models.mjs's Zephyr-like template (tools rendered as JSON);
//   org/think - a Llama-3-style template with a Qwen3-style <think> block
//               (open by default) and tool calls rendered as
//               {"name": .., "parameters": ..}: the family detector gives it
//               the llama3 output parser, so output constrained to that JSON
//               shape (output_config.format) is parsed as a real tool call,
//               which makes the tool_use rendering testable with random weights;
//   org/hermes - (hermes: true) the real Qwen2.5 template (Hermes tool calls).
// tool_choice any/tool is forced by a grammar in both call syntaxes.
import { writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { runCli, startServer } from '../lib/server.mjs';
import { makeModelsDir, LLAMA_VOCAB } from '../lib/models.mjs';

export const THINK_TEMPLATE =
  '{{ bos_token }}{% if tools %}<|start_header_id|>system<|end_header_id|>\nTools: {{ tools | tojson }}<|eot_id|>{% endif %}' +
  '{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n' +
  '{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{% if m.content %}{{ m.content }}{% endif %}' +
  '{% for c in m.tool_calls or [] %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}' +
  '<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n' +
  '{% if enable_thinking is not defined or enable_thinking %}<think>\n{% endif %}{% endif %}';

export async function setup({ args = [], env = {}, hermes = false } = {}) {
  const models = await makeModelsDir({ hermes });
  if (models.skip) return { skip: models.skip };
  const tmpl = path.join(models.dir, 'think.jinja.txt');
  writeFileSync(tmpl, THINK_TEMPLATE);
  const r = await runCli(['gen-model', path.join(models.dir, 'org/think.gguf'), '--vocab', LLAMA_VOCAB,
    '--chat-template', tmpl, '--ctx', '1024', '--seed', '3']);
  rmSync(tmpl);
  if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
  const srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', 'org/tiny', '--parallel', '2', ...args],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1', ...env },
  });
  return {
    srv, models, hermesSkip: models.hermesSkip,
    async teardown() { await srv.stop(); models.cleanup(); },
  };
}

// The tool and the output format that makes org/think call it.
export const WEATHER_TOOL = {
  name: 'get_weather', description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] },
};
export const TIME_TOOL = {
  name: 'get_time', description: 'Local time in a timezone',
  input_schema: { type: 'object', properties: { tz: { type: 'string', maxLength: 12 } }, required: ['tz'] },
};
export const FORCE_WEATHER_CALL = {
  format: {
    type: 'json_schema',
    schema: {
      type: 'object',
      properties: {
        name: { const: 'get_weather' },
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false },
      },
      required: ['name', 'parameters'], additionalProperties: false,
    },
  },
};

// POST with the Anthropic headers and plain fetch: { status, headers, body }.
export async function post(url, pathname, body, headers = {}) {
  const r = await fetch(url + pathname, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': 'k', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or text */ }
  return { status: r.status, headers: r.headers, text, body: json };
}

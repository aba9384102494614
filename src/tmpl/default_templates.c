/*
 * default_templates.c - the Jinja sources of the family default chat
 * templates (see default_templates.h for when they are used).
 *
 * Written for this project in the prompt formats the families document; each
 * one mirrors a real template's output for plain conversations:
 *   chatml    Qwen2.5/Qwen3 (without their default system prompt), Hermes-style
 *             <tool_call> blocks and <tool_response> turns
 *   llama2    the Llama-2-chat format ([INST], <<SYS>>)
 *   llama3    Llama 3.1 Instruct (system header with the knowledge/today dates,
 *             tools in the first user turn, ipython tool results)
 *   mistral   Mistral Nemo / v3-tekken ([INST], [AVAILABLE_TOOLS], [TOOL_CALLS],
 *             [TOOL_RESULTS]; the system prompt joins the last user turn)
 *   gemma     Gemma 2/3 (<start_of_turn>; a system prompt is folded into the
 *             first turn as Gemma 3 does; Gemma 2 itself rejects one)
 *   phi3      Phi-3.5 mini (<|system|> <|user|> <|assistant|> <|end|>)
 *   granite   Granite 3.3 (<|start_of_role|>; its default system prompt)
 *   deepseek  DeepSeek-R1 distills (<｜User｜> <｜Assistant｜>, opens <think>)
 *   harmony   gpt-oss (OpenAI's harmony: channels, reasoning levels, tools as
 *             a TypeScript namespace)
 * What they do differently from the real ones: they never raise_exception,
 * accept list-of-parts content (text parts joined with "\n") and tool-call
 * arguments given as a JSON string (written as is) or an object (tojson).
 *
 * Every template defines two macros first: text(content) and args(arguments).
 * The sources contain no raw newlines: every tag strips whitespace, and output
 * newlines are written as '\n' inside Jinja strings.
 */
#include "tmpl/default_templates.h"

#include <string.h>

#include "base/err.h"

#define J_MACROS                                                                                   \
  "{%- macro text(c) -%}"                                                                          \
  "{%- if c is string -%}{{ c }}"                                                                  \
  "{%- elif c is iterable and c is not mapping -%}"                                                \
  "{%- for p in c -%}{%- if p is mapping and p.type == 'text' -%}"                                 \
  "{%- if not loop.first -%}{{ '\\n' }}{%- endif -%}{{ p.text }}{%- endif -%}{%- endfor -%}"      \
  "{%- endif -%}"                                                                                  \
  "{%- endmacro -%}"                                                                               \
  "{%- macro args(a) -%}"                                                                          \
  "{%- if a is string -%}{{ a }}{%- elif a is defined and a is not none -%}{{ a | tojson }}"       \
  "{%- else -%}{{ '{}' }}{%- endif -%}"                                                            \
  "{%- endmacro -%}"

/* {"name": NAME, "arguments": ARGS} for tool call `tc` */
#define J_CALL_JSON "'{\"name\": ' + tc.function.name | tojson + ', \"arguments\": ' + args(tc.function.arguments) + '}'"

/* The Hermes tool prompt (Qwen2.5's wording): the tools as JSON lines in
 * <tools></tools>, and how to write a call. */
#define J_HERMES_TOOLS                                                                             \
  "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"          \
  "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' -}}"       \
  "{%- for t in tools -%}{{- '\\n' + t | tojson -}}{%- endfor -%}"                                   \
  "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments " \
  "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"                                        \
  "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call>' -}}"

/* The calls of `calls` (a message's tool_calls), each in <tool_call> tags,
 * one per line */
#define J_HERMES_CALLS                                                                             \
  "{%- for tc in calls -%}"                                                                        \
  "{%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}"                                             \
  "{{- '<tool_call>\\n' + " J_CALL_JSON " + '\\n</tool_call>' -}}"                                  \
  "{%- endfor -%}"

static const char CHATML[] =
    J_MACROS
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set sys = none -%}{%- set msgs = messages -%}{%- endif -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}{%- if sys -%}{{- sys + '\\n\\n' -}}{%- endif -%}"
    J_HERMES_TOOLS
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif sys is not none -%}{{- '<|im_start|>system\\n' + sys + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- for m in msgs -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set c = text(m.content) -%}{{- '<|im_start|>assistant\\n' + c -}}"
    "{%- for tc in m.tool_calls or [] -%}"
    "{%- if c or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n' + " J_CALL_JSON " + '\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or msgs[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + text(m.content) + '\\n</tool_response>' -}}"
    "{%- if loop.last or msgs[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + text(m.content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

static const char LLAMA2[] =
    J_MACROS
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set sys = none -%}{%- set msgs = messages -%}{%- endif -%}"
    "{%- for m in msgs -%}"
    "{%- set c = text(m.content) -%}"
    "{%- if loop.first and sys is not none -%}"
    "{%- set c = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + c -%}"
    "{%- endif -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set ns = namespace(t=c | trim) -%}"
    "{%- for tc in m.tool_calls or [] -%}"
    "{%- set ns.t = ns.t + (' ' if ns.t else '') + " J_CALL_JSON " -%}"
    "{%- endfor -%}"
    "{{- ' ' + ns.t + ' ' + eos_token -}}"
    "{%- else -%}"
    "{{- bos_token + '[INST] ' + c | trim + ' [/INST]' -}}"
    "{%- endif -%}"
    "{%- endfor -%}";

static const char LLAMA3[] =
    J_MACROS
    "{{- bos_token -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) | trim -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set sys = '' -%}{%- set msgs = messages -%}{%- endif -%}"
    "{%- if date_string is not defined -%}{%- set date_string = strftime_now('%d %b %Y') -%}{%- endif -%}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' -}}"
    "{%- if tools -%}{{- 'Environment: ipython\\n' -}}{%- endif -%}"
    "{{- 'Cutting Knowledge Date: December 2023\\nToday Date: ' + date_string + '\\n\\n' + sys + '<|eot_id|>' -}}"
    "{%- set ns = namespace(tools_done=false) -%}"
    "{%- for m in msgs -%}"
    "{%- if m.role == 'user' and tools and not ns.tools_done -%}"
    "{%- set ns.tools_done = true -%}"
    "{{- '<|start_header_id|>user<|end_header_id|>\\n\\nGiven the following functions, please respond with a JSON "
    "for a function call with its proper arguments that best answers the given prompt.\\n\\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}."
    "Do not use variables.\\n\\n' -}}"
    "{%- for t in tools -%}{{- t | tojson(indent=4) + '\\n\\n' -}}{%- endfor -%}"
    "{{- text(m.content) | trim + '<|eot_id|>' -}}"
    "{%- elif m.tool_calls -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
    "{%- for tc in m.tool_calls -%}"
    "{%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '{\"name\": \"' + tc.function.name + '\", \"parameters\": ' + args(tc.function.arguments) + '}' -}}"
    "{%- endfor -%}"
    "{{- '<|eot_id|>' -}}"
    "{%- elif m.role == 'tool' or m.role == 'ipython' -%}"
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' -}}"
    "{%- if m.content is mapping or m.content is iterable -%}{{- m.content | tojson -}}"
    "{%- else -%}{{- m.content -}}{%- endif -%}"
    "{{- '<|eot_id|>' -}}"
    "{%- else -%}"
    "{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + text(m.content) | trim + '<|eot_id|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}";

static const char MISTRAL[] =
    J_MACROS
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set sys = none -%}{%- set msgs = messages -%}{%- endif -%}"
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in msgs -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{{- bos_token -}}"
    "{%- for m in msgs -%}"
    "{%- if m.role == 'user' -%}"
    "{%- if tools and loop.index0 == ns.last_user -%}"
    "{{- '[AVAILABLE_TOOLS]' + tools | tojson + '[/AVAILABLE_TOOLS]' -}}"
    "{%- endif -%}"
    "{%- if loop.index0 == ns.last_user and sys is not none -%}"
    "{{- '[INST]' + sys + '\\n\\n' + text(m.content) + '[/INST]' -}}"
    "{%- else -%}{{- '[INST]' + text(m.content) + '[/INST]' -}}{%- endif -%}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- text(m.content) -}}"
    "{%- if m.tool_calls -%}"
    "{{- '[TOOL_CALLS][' -}}"
    "{%- for tc in m.tool_calls -%}"
    "{%- if not loop.first -%}{{- ', ' -}}{%- endif -%}"
    "{{- '{\"name\": ' + tc.function.name | tojson + ', \"arguments\": ' + args(tc.function.arguments) -}}"
    "{%- if tc.id is defined -%}{{- ', \"id\": ' + tc.id | tojson -}}{%- endif -%}"
    "{{- '}' -}}"
    "{%- endfor -%}"
    "{{- ']' -}}"
    "{%- endif -%}"
    "{{- eos_token -}}"
    "{%- elif m.role == 'tool' -%}"
    "{{- '[TOOL_RESULTS]{\"content\": ' + text(m.content) -}}"
    "{%- if m.tool_call_id is defined -%}{{- ', \"call_id\": ' + m.tool_call_id | tojson -}}{%- endif -%}"
    "{{- '}[/TOOL_RESULTS]' -}}"
    "{%- endif -%}"
    "{%- endfor -%}";

static const char GEMMA[] =
    J_MACROS
    "{{- bos_token -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set sys = '' -%}{%- set msgs = messages -%}{%- endif -%}"
    "{%- if tools -%}"
    "{%- set sys = (sys + '\\n\\n' if sys else '') + 'You can call these functions by answering with a JSON object "
    "{\"name\": function name, \"arguments\": object of arguments}:\\n' + tools | tojson -%}"
    "{%- endif -%}"
    "{%- for m in msgs -%}"
    "{%- set role = 'model' if m.role == 'assistant' else 'user' -%}"
    "{%- set c = text(m.content) | trim -%}"
    "{{- '<start_of_turn>' + role + '\\n' -}}"
    "{%- if loop.first and sys -%}{{- sys + '\\n\\n' -}}{%- endif -%}"
    "{{- c -}}"
    "{%- for tc in m.tool_calls or [] -%}"
    "{%- if c or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- " J_CALL_JSON " -}}"
    "{%- endfor -%}"
    "{{- '<end_of_turn>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}";

static const char PHI3[] =
    J_MACROS
    "{%- if tools and not (messages and messages[0].role == 'system') -%}"
    "{{- '<|system|>\\n<|tool|>' + tools | tojson + '<|/tool|><|end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- set c = text(m.content) -%}"
    "{%- if m.role == 'system' -%}"
    "{%- if c or (loop.first and tools) -%}"
    "{{- '<|system|>\\n' + c -}}"
    "{%- if loop.first and tools -%}{{- '<|tool|>' + tools | tojson + '<|/tool|>' -}}{%- endif -%}"
    "{{- '<|end|>\\n' -}}"
    "{%- endif -%}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- '<|assistant|>\\n' + c -}}"
    "{%- if m.tool_calls -%}"
    "{{- '<|tool_call|>[' -}}"
    "{%- for tc in m.tool_calls -%}{%- if not loop.first -%}{{- ', ' -}}{%- endif -%}{{- " J_CALL_JSON " -}}{%- endfor -%}"
    "{{- ']<|/tool_call|>' -}}"
    "{%- endif -%}"
    "{{- '<|end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|' + m.role + '|>\\n' + c + '<|end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- else -%}{{- eos_token -}}{%- endif -%}";

static const char GRANITE[] =
    J_MACROS
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set sys = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}"
    "{%- set sys = \"Knowledge Cutoff Date: April 2024. Today's Date: \" + strftime_now('%B %d, %Y') + "
    "\". You are Granite, developed by IBM.\" -%}"
    "{%- if tools -%}"
    "{%- set sys = sys + \" You are a helpful assistant with access to the following tools. When a tool is required "
    "to answer the user's query, respond only with <|tool_call|> followed by a JSON list of tools used. If a tool "
    "does not exist in the provided list of tools, notify the user that you do not have the ability to fulfill the "
    "request.\" -%}"
    "{%- else -%}{%- set sys = sys + ' You are a helpful AI assistant.' -%}{%- endif -%}"
    "{%- set msgs = messages -%}"
    "{%- endif -%}"
    "{{- '<|start_of_role|>system<|end_of_role|>' + sys + '<|end_of_text|>\\n' -}}"
    "{%- if tools -%}"
    "{{- '<|start_of_role|>available_tools<|end_of_role|>' + tools | tojson(indent=4) + '<|end_of_text|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in msgs -%}"
    "{{- '<|start_of_role|>' + m.role + '<|end_of_role|>' + text(m.content) -}}"
    "{%- if m.tool_calls -%}"
    "{{- '<|tool_call|>[' -}}"
    "{%- for tc in m.tool_calls -%}{%- if not loop.first -%}{{- ', ' -}}{%- endif -%}{{- " J_CALL_JSON " -}}{%- endfor -%}"
    "{{- ']' -}}"
    "{%- endif -%}"
    "{{- '<|end_of_text|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}";

static const char DEEPSEEK[] =
    J_MACROS
    "{%- set ns = namespace(sys='', tool=false) -%}"
    "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = text(m.content) -%}{%- endif -%}{%- endfor -%}"
    "{{- bos_token + ns.sys -}}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}"
    "{%- if ns.tool -%}{{- '<｜tool▁outputs▁end｜>' -}}{%- set ns.tool = false -%}{%- endif -%}"
    "{{- '<｜User｜>' + text(m.content) -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- set c = text(m.content) -%}"
    "{%- if '</think>' in c -%}{%- set c = c.split('</think>')[-1] -%}{%- endif -%}"
    "{%- if ns.tool -%}{{- '<｜tool▁outputs▁end｜>' -}}{%- set ns.tool = false -%}"
    "{%- else -%}{{- '<｜Assistant｜>' -}}{%- endif -%}"
    "{{- c -}}"
    "{%- if m.tool_calls -%}"
    "{{- '<｜tool▁calls▁begin｜>' -}}"
    "{%- for tc in m.tool_calls -%}"
    "{%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<｜tool▁call▁begin｜>function<｜tool▁sep｜>' + tc.function.name + '\\n```json\\n' + "
    "args(tc.function.arguments) + '\\n```<｜tool▁call▁end｜>' -}}"
    "{%- endfor -%}"
    "{{- '<｜tool▁calls▁end｜>' -}}"
    "{%- endif -%}"
    "{{- '<｜end▁of▁sentence｜>' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if not ns.tool -%}{{- '<｜tool▁outputs▁begin｜>' -}}{%- else -%}{{- '\\n' -}}{%- endif -%}"
    "{%- set ns.tool = true -%}"
    "{{- '<｜tool▁output▁begin｜>' + text(m.content) + '<｜tool▁output▁end｜>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if ns.tool -%}{{- '<｜tool▁outputs▁end｜>' -}}"
    "{%- elif add_generation_prompt -%}"
    "{{- '<｜Assistant｜><think>\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}";

/* OpenAI's harmony format (gpt-oss): a system message naming the model,
 * the date, the reasoning level (the reasoning_effort global: low, medium
 * or high; medium by default) and the channels; a developer message with
 * the instructions and the tools as a TypeScript namespace; turns as
 * <|start|>ROLE<|message|>..<|end|>; the assistant's answer on the final
 * channel, its reasoning on analysis (kept only after the last user turn,
 * as gpt-oss drops earlier chains of thought), calls on commentary to
 * functions.NAME ending in <|call|>, results from functions.NAME. J_TS is
 * one JSON-schema property's TypeScript type. */
#define J_TS(v)                                                                                    \
  "{%- if " v ".enum is defined and " v ".enum -%}"                                              \
  "{%- for e in " v ".enum -%}{%- if not loop.first -%}{{- ' | ' -}}{%- endif -%}{{- e | tojson -}}{%- endfor -%}" \
  "{%- elif " v ".type == 'string' -%}{{- 'string' -}}"                                           \
  "{%- elif " v ".type == 'integer' or " v ".type == 'number' -%}{{- 'number' -}}"                \
  "{%- elif " v ".type == 'boolean' -%}{{- 'boolean' -}}"                                         \
  "{%- elif " v ".type == 'array' -%}{{- 'any[]' -}}"                                             \
  "{%- else -%}{{- 'any' -}}{%- endif -%}"

static const char HARMONY[] =
    J_MACROS
    "{%- set effort = reasoning_effort if reasoning_effort is defined and reasoning_effort else 'medium' -%}"
    "{%- if messages and (messages[0].role == 'system' or messages[0].role == 'developer') -%}"
    "{%- set instr = text(messages[0].content) -%}{%- set msgs = messages[1:] -%}"
    "{%- else -%}{%- set instr = '' -%}{%- set msgs = messages -%}{%- endif -%}"
    "{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\\n"
    "Knowledge cutoff: 2024-06\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\\n\\nReasoning: ' + effort + "
    "'\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message.' -}}"
    "{%- if tools -%}{{- '\\nCalls to these tools must go to the commentary channel: \\'functions\\'.' -}}{%- endif -%}"
    "{{- '<|end|>' -}}"
    "{%- if instr or tools -%}"
    "{{- '<|start|>developer<|message|>' -}}"
    "{%- if instr -%}{{- '# Instructions\\n\\n' + instr -}}{%- if tools -%}{{- '\\n\\n' -}}{%- endif -%}{%- endif -%}"
    "{%- if tools -%}"
    "{{- '# Tools\\n\\n## functions\\n\\nnamespace functions {\\n\\n' -}}"
    "{%- for t in tools -%}"
    "{%- set f = t.function if t.function is defined else t -%}"
    "{%- if f.description is defined and f.description -%}{{- '// ' + f.description | replace('\\n', '\\n// ') + '\\n' -}}{%- endif -%}"
    "{%- set p = f.parameters if f.parameters is defined and f.parameters else {} -%}"
    "{%- if p.properties is defined and p.properties -%}"
    "{{- 'type ' + f.name + ' = (_: {\\n' -}}"
    "{%- for k, v in p.properties.items() -%}"
    "{%- if v.description is defined and v.description -%}{{- '// ' + v.description | replace('\\n', '\\n// ') + '\\n' -}}{%- endif -%}"
    "{{- k -}}{%- if not (p.required is defined and k in p.required) -%}{{- '?' -}}{%- endif -%}{{- ': ' -}}"
    J_TS("v")
    "{{- ',\\n' -}}"
    "{%- endfor -%}"
    "{{- '}) => any;\\n\\n' -}}"
    "{%- else -%}{{- 'type ' + f.name + ' = () => any;\\n\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{{- '} // namespace functions' -}}"
    "{%- endif -%}"
    "{{- '<|end|>' -}}"
    "{%- endif -%}"
    "{%- set ns = namespace(last_user=-1, calls=[], k=0) -%}"
    "{%- for m in msgs -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in msgs -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- if loop.index0 > ns.last_user and m.reasoning_content is defined and m.reasoning_content -%}"
    "{{- '<|start|>assistant<|channel|>analysis<|message|>' + m.reasoning_content + '<|end|>' -}}"
    "{%- endif -%}"
    "{%- set c = text(m.content) -%}"
    "{%- set ns.calls = m.tool_calls or [] -%}{%- set ns.k = 0 -%}"
    "{%- if c -%}"
    "{{- '<|start|>assistant<|channel|>' + ('commentary' if ns.calls else 'final') + '<|message|>' + c + '<|end|>' -}}"
    "{%- endif -%}"
    "{%- for tc in ns.calls -%}"
    "{{- '<|start|>assistant<|channel|>commentary to=functions.' + tc.function.name + ' <|constrain|>json<|message|>' -}}"
    "{{- args(tc.function.arguments) + '<|call|>' -}}"
    "{%- endfor -%}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if m.name is defined and m.name -%}{%- set fname = m.name -%}"
    "{%- elif ns.k < ns.calls | length -%}{%- set fname = ns.calls[ns.k].function.name -%}"
    "{%- else -%}{%- set fname = 'tool' -%}{%- endif -%}"
    "{%- set ns.k = ns.k + 1 -%}"
    "{{- '<|start|>functions.' + fname + ' to=assistant<|channel|>commentary<|message|>' + text(m.content) + '<|end|>' -}}"
    "{%- elif m.role == 'system' or m.role == 'developer' -%}"
    "{{- '<|start|>developer<|message|>' + text(m.content) + '<|end|>' -}}"
    "{%- else -%}"
    "{{- '<|start|>' + m.role + '<|message|>' + text(m.content) + '<|end|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start|>assistant' -}}{%- endif -%}";

/* The generic tool-calling prompt for templates that do not render tools
 * (api/gen.c): with `tools` the text for the system prompt, with `calls`
 * the text of an assistant turn's calls, both in the Hermes format. */
static const char GENERIC_TOOLS[] =
    J_MACROS
    "{%- if calls is defined -%}" J_HERMES_CALLS "{%- else -%}" J_HERMES_TOOLS "{%- endif -%}";

const char *tmpl_generic_tools_source(void) { return GENERIC_TOOLS; }

typedef struct default_row {
  const char *name;
  const char *src;
} default_row;

/* indexed by tmpl_default_id */
static const default_row DEFAULTS[TMPL_DEFAULT_COUNT] = {
    [TMPL_DEFAULT_NONE] = {"none", NULL},          [TMPL_DEFAULT_CHATML] = {"chatml", CHATML},
    [TMPL_DEFAULT_LLAMA2] = {"llama2", LLAMA2},    [TMPL_DEFAULT_LLAMA3] = {"llama3", LLAMA3},
    [TMPL_DEFAULT_MISTRAL] = {"mistral", MISTRAL}, [TMPL_DEFAULT_GEMMA] = {"gemma", GEMMA},
    [TMPL_DEFAULT_PHI3] = {"phi3", PHI3},          [TMPL_DEFAULT_GRANITE] = {"granite", GRANITE},
    [TMPL_DEFAULT_DEEPSEEK] = {"deepseek", DEEPSEEK}, [TMPL_DEFAULT_HARMONY] = {"harmony", HARMONY},
};

const char *tmpl_default_source(tmpl_default_id id) {
  if ((unsigned)id >= TMPL_DEFAULT_COUNT) return NULL;
  return DEFAULTS[id].src;
}

const char *tmpl_default_name(tmpl_default_id id) {
  if ((unsigned)id >= TMPL_DEFAULT_COUNT) return "unknown";
  return DEFAULTS[id].name;
}

int tmpl_default_by_name(const char *name, tmpl_default_id *out) {
  for (int i = 0; name && i < TMPL_DEFAULT_COUNT; i++)
    if (strcmp(DEFAULTS[i].name, name) == 0) {
      *out = (tmpl_default_id)i;
      return 0;
    }
  return err_set(ERR_NOT_FOUND, "no default chat template named '%s'", name ? name : "(null)");
}

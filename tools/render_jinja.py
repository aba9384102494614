#!/usr/bin/python3
"""Reference renderer for chat templates: Python jinja2 configured the way
Hugging Face transformers configures it (transformers/utils/chat_template_utils.py):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker-like {% generation %}, jinja2.ext.loopcontrols]),
a tojson filter that is json.dumps(ensure_ascii=False, ...), and the globals
raise_exception(msg) and strftime_now(fmt). strftime_now formats a FIXED date
(26 Jul 2024) so that the C side can be compared byte for byte.

Globals of a render, as transformers passes them: messages, tools (None when
the conversation has none), documents=None, add_generation_prompt,
bos_token "<s>", eos_token "</s>", then every key of the conversation's
"chat_template_kwargs" object (enable_thinking, ...). A conversation file is an
OpenAI-style chat request body, so `parley chat-template --request` reads the
same files.

Usage:
  render_jinja.py TEMPLATE.jinja CONVERSATION.json     print the render; exit 3 if jinja2 raises
  render_jinja.py --batch OUTDIR TEMPLATE_DIR CONV_DIR  render every pair into OUTDIR/<t>__<c>.out
                                                        (or .err holding the exception) and exit 0
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %} renders its body (transformers'
    AssistantTracker does the same when no assistant mask is requested)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return FIXED_NOW.strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, template, conv):
    kwargs = dict(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                  add_generation_prompt=conv.get("add_generation_prompt", False),
                  bos_token="<s>", eos_token="</s>")
    kwargs.update(conv.get("chat_template_kwargs") or {})
    if isinstance(template, str):
        template = env.from_string(template)
    return template.render(**kwargs)


def main():
    env = make_env()
    if len(sys.argv) == 5 and sys.argv[1] == "--batch":
        outdir, tdir, cdir = sys.argv[2:]
        convs = sorted(f for f in os.listdir(cdir) if f.endswith(".json"))
        for t in sorted(f for f in os.listdir(tdir) if f.endswith(".jinja")):
            with open(os.path.join(tdir, t), encoding="utf-8") as fh:
                src = fh.read()
            try:
                compiled = env.from_string(src)
            except Exception as e:  # the template does not even compile: every pair is an error
                compiled = e
            for cname in convs:
                with open(os.path.join(cdir, cname), encoding="utf-8") as fh:
                    conv = json.load(fh)
                base = os.path.join(outdir, t[:-len(".jinja")] + "__" + cname[:-len(".json")])
                try:
                    if isinstance(compiled, Exception):
                        raise compiled
                    text = render(env, compiled, conv)
                    with open(base + ".out", "w", encoding="utf-8", newline="") as fh:
                        fh.write(text)
                except Exception as e:  # jinja2 rejects this pair: the C test skips it
                    with open(base + ".err", "w", encoding="utf-8") as fh:
                        fh.write("%s: %s\n" % (type(e).__name__, e))
        return 0
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as fh:
        src = fh.read()
    with open(sys.argv[2], encoding="utf-8") as fh:
        conv = json.load(fh)
    try:
        text = render(env, src, conv)
    except Exception as e:
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
        return 3
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

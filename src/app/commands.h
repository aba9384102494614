/*
 * commands.h - the CLI subcommands beside `serve` (in main.c). Each lives in
 * its own file under app/ as `int cmd_NAME(int argc, char **argv)`, receiving
 * the arguments after the command name, printing its own errors, and
 * returning the process exit status (2 for usage errors). main.c holds the
 * table that names them.
 */
#ifndef PARLEY_APP_COMMANDS_H
#define PARLEY_APP_COMMANDS_H

/* parley tokenize MODEL.gguf TEXT [--json] [--no-special] [--no-bos]
 * (cmd_tokenize.c): token ids and pieces of TEXT under MODEL's tokenizer. */
int cmd_tokenize(int argc, char **argv);

/* parley chat-template (--model MODEL.gguf | --template FILE.jinja)
 *   --request FILE.json [--chat-template FILE] [--bos TOKEN] [--eos TOKEN]
 * prints the prompt text a chat request renders to (cmd_chat_template.c). */
int cmd_chat_template(int argc, char **argv);

/* parley run MODEL.gguf -p TEXT | --tokens 1,2,3 [-n N] [--temp T] [--seed S] [-t N]
 * (cmd_run.c): a raw completion streamed to the terminal. */
int cmd_run(int argc, char **argv);
/* parley bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] [--json]
 * (cmd_bench.c): prompt-processing and generation tokens/s. */
int cmd_bench(int argc, char **argv);
/* parley gen-model OUT.gguf [--shape small|tinyllama] [--type T] [--seed S]
 * (cmd_bench.c): a random-weight llama model for benchmarks and tests. */
int cmd_gen_model(int argc, char **argv);
int cmd_gen_vocab(int argc, char **argv);

/* parley list [--json] [--model [NAME=]PATH]... [--alias NAME=MODEL]...
 *   [--default NAME] [config options] (cmd_list.c): the merged model list of
 * model/registry.h (models dir, --model, Ollama, LM Studio, HF cache). */
int cmd_list(int argc, char **argv);

/* parley pull NAME [--file PATTERN] [--quant QUANT] [--quiet] [config options]
 * (cmd_pull.c): downloads a model from the Ollama registry or the Hugging
 * Face hub into the models dir (model/pull.h), resuming a killed pull. */
int cmd_pull(int argc, char **argv);
/* parley rm NAME [config options] (cmd_pull.c): deletes a model parley pulled. */
int cmd_rm(int argc, char **argv);

#endif

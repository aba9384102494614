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

#endif

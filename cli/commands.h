// cli/commands.h — the `petrel` subcommands. Each lives in cli/cmd_<name>.c
// and receives argv starting at the subcommand name. Returns the exit code.
#ifndef PETREL_CLI_COMMANDS_H
#define PETREL_CLI_COMMANDS_H

int cmd_convert(int argc, char **argv);    // HF checkpoint -> GGUF
int cmd_inspect(int argc, char **argv);    // GGUF metadata / tensor table
int cmd_synth(int argc, char **argv);      // synthetic HF checkpoints
int cmd_logits(int argc, char **argv);     // raw logits for token ids
int cmd_run(int argc, char **argv);        // generate
int cmd_chat(int argc, char **argv);       // interactive chat
int cmd_tokenize(int argc, char **argv);   // text -> ids
int cmd_detokenize(int argc, char **argv); // ids -> text
int cmd_serve(int argc, char **argv);      // OpenAI-compatible server
int cmd_bench(int argc, char **argv);      // quick speed check

#endif

/* main.c - placeholder entry until app/cli.c lands in this commit series. */
#include <stdio.h>
int main(void) { puts("parley"); return 0; }

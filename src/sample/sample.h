/*
 * sample.h - choosing the next token from a row of logits: greedy,
 * temperature, top-k, top-p (nucleus), min-p, repetition / presence /
 * frequency penalties over a window of recent tokens, logit bias, a seeded
 * random generator, and log-probabilities with the top-N alternatives.
 *
 * The chain, in this order (the order Hugging Face's generate() applies its
 * processors and warpers; llama.cpp applies temperature last instead):
 *   1. logit bias: logit[t] += bias (a bias of -INFINITY bans t)
 *   2. penalties, for each token t seen c_t > 0 times in the window:
 *        repetition (llama.cpp / CTRL): logit > 0 ? logit / rp : logit * rp
 *        frequency and presence (OpenAI): logit -= c_t * fp + pp
 *   3. log-probabilities, when asked: log_softmax of these logits (before
 *      temperature and truncation, so they describe the model's distribution
 *      with bias and penalties, as the OpenAI API reports them)
 *   4. temperature <= 0: greedy, the largest logit (lowest id on ties)
 *   5. logits / temperature, softmax
 *   6. top-k: keep the k most probable (k 0 = off)
 *   7. top-p: keep the smallest most-probable prefix whose mass >= p (1 = off)
 *   8. min-p: keep tokens with prob >= min_p * max prob (0 = off)
 *   9. renormalize and draw with the generator.
 * Ties in probability are ordered by token id, so a seed reproduces a run on
 * any machine.
 *
 * Generator: xoshiro256** (Blackman & Vigna, 2018) seeded by expanding the
 * 64-bit seed with splitmix64; a draw is u = (next() >> 11) * 2^-53 in [0,1),
 * and the token is the first (in descending probability) whose cumulative
 * probability exceeds u * total.
 *
 * A sampler is owned by one thread. It allocates its candidate arrays once
 * (sample_new) and nothing per token.
 */
#ifndef PARLEY_SAMPLE_SAMPLE_H
#define PARLEY_SAMPLE_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAMPLE_MAX_LOGPROBS 20

typedef struct sample_bias {
  int32_t token;
  float bias; /* added to the logit; -INFINITY bans the token */
} sample_bias;

typedef struct sample_params {
  float temperature;       /* <= 0: greedy */
  int32_t top_k;           /* 0: off */
  float top_p;             /* in (0, 1]; 1: off */
  float min_p;             /* in [0, 1]; 0: off */
  float repeat_penalty;    /* >= 0... 1: off */
  float presence_penalty;  /* 0: off (OpenAI range -2..2) */
  float frequency_penalty; /* 0: off */
  int32_t penalty_last_n;  /* window of recent tokens the penalties see; 0: off */
  uint64_t seed;
  const sample_bias *bias; /* copied by sample_new */
  size_t n_bias;
  int32_t n_logprobs;      /* top alternatives to report, 0..SAMPLE_MAX_LOGPROBS */
} sample_params;

/* temperature 1, top_p 1, repeat_penalty 1, everything else off, seed 0. */
sample_params sample_default_params(void);

typedef struct sample_alt {
  int32_t token;
  float logprob;
} sample_alt;

typedef struct sample_result {
  int32_t token;
  float logprob;   /* of the chosen token (step 3); NAN when n_logprobs = 0
                      and logprobs were not asked for */
  int32_t n_top;   /* alternatives filled (n_logprobs) */
  sample_alt top[SAMPLE_MAX_LOGPROBS]; /* most probable first */
} sample_result;

typedef struct sampler sampler;

/* ERR_RANGE naming the parameter for values outside the ranges above or a
 * bias token outside 0..n_vocab-1; ERR_NOMEM. */
int sample_new(const sample_params *p, int32_t n_vocab, sampler **out);
void sample_free(sampler *s);
/* Records a token in the penalty window (prompt tokens too, if the caller
 * wants them penalized). Tokens outside the vocabulary are ignored. */
void sample_accept(sampler *s, int32_t token);
/* Empties the window and reseeds the generator with seed. */
void sample_reset(sampler *s, uint64_t seed);
/* Picks a token from logits[n_vocab] (not modified). want_logprob fills
 * out->logprob even when n_logprobs is 0. Does not accept the token. */
int sample_next(sampler *s, const float *logits, bool want_logprob, sample_result *out);

/* The generator on its own (tests, and anyone needing reproducible noise). */
typedef struct sample_rng {
  uint64_t s[4];
} sample_rng;
void sample_rng_seed(sample_rng *r, uint64_t seed);
uint64_t sample_rng_next(sample_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double sample_rng_uniform(sample_rng *r);

#endif

/* The demo's data: a synthetic SQuAD-format data set from templates.
 *
 * Each paragraph is about one invented subject (a person, a city or a
 * company) and states three facts about it whose answers have the same type
 * (a founder, a chief executive and a chairman; or three years; or three
 * counts), sometimes with a filler sentence, in random order. The questions
 * ask about those facts with varied forms ("Who founded X?", "Which person
 * founded X?", "X was founded by whom?"), so every question has three
 * candidates of its answer's type and neither the type nor the position
 * gives the answer: the model has to find the sentence of the question's
 * relation (the trivial baselines below score about 33).
 *
 * Names are made of two-syllable words ("Kalo Tesa"), and the entities are split
 * between train and test: no person, city, company or river of the test
 * split appears in the training split, so test answers were never seen.
 * The vocabulary (vocab.txt) is built from the generator's own words, digits
 * and syllables (as WordPiece pieces), so every text tokenizes without
 * [UNK].
 *
 * The generator also writes the predictions of trivial baselines for the
 * test split, which the demo evaluates next to the model:
 * - first: the first mention in the context of an entity of the answer's type;
 * - first-not-in-question: the same, skipping the question's own entities;
 * - random: a random mention of the answer's type (seeded). */
#ifndef BERTC_SYNTH_H
#define BERTC_SYNTH_H

#include <stdint.h>

typedef struct {
    uint64_t seed;
    int train_paragraphs;
    int test_paragraphs;
    int groups;         /* answer types asked about per paragraph */
    int group_size;     /* facts of each of those types (1..3): the candidates of a question */
    int questions;      /* questions per paragraph (at most one per fact) */
    int extra_pct;      /* paragraphs with one more fact of another kind */
    int filler_pct;     /* paragraphs with a filler sentence */
    int sentence_forms; /* templates used per relation for the facts (0 = all) */
    int question_forms; /* templates used per relation for questions (0 = all) */
} synth_opts;

/* The demo's shape: one subject, one answer type with three facts (so a
 * question has three candidates of its type), three questions, a filler
 * sentence in one paragraph of five; one sentence form per relation (the
 * tiny model learns in two minutes), every question form. */
synth_opts synth_opts_default(uint64_t seed, int train_paragraphs, int test_paragraphs);

typedef struct {
    int train_questions, test_questions;
    int train_paragraphs, test_paragraphs;
    int vocab_size;
    int max_words; /* longest paragraph + question, in whitespace words */
} synth_stats;

/* Writes into dir (created if needed): train.json, test.json (SQuAD v1.1
 * format), vocab.txt, tokenizer_config.json (lower case), and
 * baseline-first.json, baseline-first-not-in-question.json,
 * baseline-random.json ({"id": "answer"} for the test split). The same
 * options give the same bytes. */
int synth_generate(const synth_opts *o, const char *dir, synth_stats *stats);

#define SYNTH_NBASELINES 3
extern const char *const synth_baseline_names[SYNTH_NBASELINES];

#endif

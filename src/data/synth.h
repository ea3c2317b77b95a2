/* The demo's data: a synthetic SQuAD-format data set from templates.
 *
 * Each paragraph is a handful of facts about invented entities (people,
 * cities, companies, rivers; years and counts as values), written with
 * varied sentence templates and mixed with facts about other entities of the
 * same kinds (distractors) and filler sentences, in random order. Questions
 * ask about those facts with varied forms ("Who founded X?", "X was founded
 * by whom?", "Which person started X?"), so the answer is never found by its
 * type or position alone: the model has to find the sentence about the
 * question's subject and relation.
 *
 * Names are made of syllables ("Kalomi Tesavu"), and the entities are split
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
    int relations_min, relations_max; /* facts about the main subject */
    int two_subjects_pct;             /* paragraphs with a second subject */
    int templates;                    /* use only the first N templates of each kind (0 = all) */
} synth_opts;

/* The demo's shape: 3-4 facts about the main subject, a second subject in
 * half of the paragraphs. */
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

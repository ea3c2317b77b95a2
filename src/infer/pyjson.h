/* JSON as Python's json.dumps writes it, appended to an sbuf: what
 * predictions.json, nbest_predictions.json, null_odds.json and the answers
 * of bertc serve hold, byte for byte as utils_qa.py and a Python server
 * would write them. Strings: sb_json_string(b, s, SB_JSON_PYTHON)
 * (core/sbuf.h); floats: pyjson_float. */
#ifndef BERTC_PYJSON_H
#define BERTC_PYJSON_H

#include "core/sbuf.h"

/* x as Python's repr of a float ("0.5", "1e-05", "NaN", "Infinity"). */
void pyjson_float(sbuf *b, double x);

#endif

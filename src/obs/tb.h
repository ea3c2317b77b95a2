/* TensorBoard event files, written without TensorFlow or protobuf.
 *
 * A file RUN/tb/events.out.tfevents.<unix time>.<hostname> is a sequence of
 * TFRecords:
 *
 *   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
 *
 * (little-endian; the mask is crc32c_mask of core/crc32c.h). Each record is
 * a serialised tensorflow.Event protobuf; the first one carries
 * file_version "brain.Event:2", the others a Summary with one scalar:
 *
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
 *             Summary summary = 5; SessionLog session_log = 7; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 *   SessionLog { enum status = 1 (START = 1); }
 *
 * A resumed run writes a SessionLog START first (obs_open puts it at the
 * checkpoint's step + 1): TensorBoard then drops the points of the previous
 * process from that step on, which the resumed run is about to write again.
 *
 * tb_scalar is thread-safe (the trainer and the monitor thread share one
 * writer). Records are buffered by stdio and flushed by tb_flush, at most
 * every two seconds by tb_scalar, and by tb_close. */
#ifndef BERTC_OBS_TB_H
#define BERTC_OBS_TB_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb_writer tb_writer;

/* Creates dir if needed and a new event file in it (never appends to an old
 * one: a name already taken gets a ".1", ".2" ... suffix). */
int tb_open(tb_writer **out, const char *dir);
/* wall_time 0 means now. */
int tb_scalar(tb_writer *w, int64_t step, const char *tag, float value, double wall_time);
int tb_session_start(tb_writer *w, int64_t step);
int tb_flush(tb_writer *w);
/* Flushes and closes; returns the first error of the file's life, if any. */
int tb_close(tb_writer *w);
const char *tb_path(const tb_writer *w);

/* The encoders, exposed for the round-trip test. Each returns the number
 * of bytes the encoding needs; it writes them only when that fits in cap. */
size_t tb_encode_version_event(uint8_t *buf, size_t cap, double wall_time);
size_t tb_encode_scalar_event(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *tag, float value);
size_t tb_encode_session_start(uint8_t *buf, size_t cap, double wall_time, int64_t step);
/* TFRecord framing of n bytes of data: n + 16 bytes. */
size_t tb_frame(uint8_t *buf, size_t cap, const uint8_t *data, size_t n);

#endif

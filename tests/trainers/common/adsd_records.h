/* adsd_records.h - the ADSD dataset format that the linear-regression
 * example trainers (sgd_read, sgd_stdio, sgd_mpi) read: a 16-byte header
 * ("ADSD", u32 dimension, u64 record count, little endian) followed by the
 * records, each a u64 id, float x[dimension] and float y.  Here: the
 * header's check (magic, dimension, count against fstat()'s file size), the
 * start of a pass and a batch of records read with read(), the gradient and
 * SGD step of a linear model on a batch and the ids log's lines for a batch.
 *
 * The header check takes the bytes that the trainer read in its own way
 * (read, pread, stdio) and the descriptor it read them from.  The two
 * *_with_read functions are for the trainers that read the file sequentially
 * with read() (sgd_mpi, and sgd_read without --pread); a trainer that reads
 * otherwise does not call them.
 *
 * Built into each trainer with its own section per function and linked with
 * --gc-sections, so a trainer imports only the libc functions it calls. */
#ifndef ADSD_RECORDS_H
#define ADSD_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ADSD_HEADER_SIZE 16

/* An open ADSD file and what its header says (dim 0: no header read yet). */
struct adsd_dataset {
    int fd;
    uint32_t dim;
    uint64_t count;
    size_t record_size;
};

/* Checks a header's magic and dimension (1..65536 and, once data->dim is set,
 * the same again) and sets data's dim, count and record size; dies with
 * status 3, "PATH: bad magic (not an ADSD dataset)" or "PATH:
 * DIMENSION_PROBLEM DIM" (e.g. "bad dimension"). */
void adsd_accept_header(struct adsd_dataset *data, const unsigned char header[ADSD_HEADER_SIZE],
                        const char *dimension_problem, const char *path);

/* fstat()s fd (dying with status 1 if that fails) and dies with status 3
 * unless the file's size is the header's 16 bytes plus count records. */
void adsd_check_header_against_file_size(const struct adsd_dataset *data, int fd,
                                         const char *path);

/* The start of a pass over data->fd read with read(): lseek(fd, 0,
 * SEEK_SET), read() of the 16-byte header (trainer_read_full), its check
 * (adsd_accept_header, "bad or changed dimension") and the fstat() check. */
void adsd_rewind_and_check_header_with_read(struct adsd_dataset *data, const char *path);

/* Reads up to batch records with read() (trainer_read_full) into buffer;
 * *at_end is set when a read returned 0; dies with status 3 on a truncated
 * record.  Returns the records read. */
size_t adsd_read_batch_with_read(struct adsd_dataset *data, unsigned char *buffer, uint64_t batch,
                                 bool *at_end, const char *path);

/* The local gradient of the linear model w's mean squared error over n
 * records into grad[0..dim); returns the summed squared error.  Fixed order,
 * float only: reproducible. */
float adsd_mean_squared_error_gradient(const float *w, float *grad, uint32_t dim,
                                       const unsigned char *records, size_t n, size_t record_size);

/* One SGD step of w with learning rate lr on the mean squared error of n
 * records (grad: scratch of dim floats); returns the summed squared error
 * before the update. */
float adsd_linear_regression_sgd_step(float *w, float *grad, uint32_t dim,
                                      const unsigned char *records, size_t n, size_t record_size,
                                      float lr);

/* The ids log's lines for a batch, in one write() to log_fd: "id ID epoch E"
 * per record, then "step S"; nothing when log_fd < 0. */
void adsd_log_batch_ids(int log_fd, const unsigned char *records, size_t n, size_t record_size,
                        uint64_t epoch, uint64_t step);

/* The weights for data of dimension dim: saved (from a checkpoint of
 * saved_dim, dying with status 3 when that differs from dim) or, when saved
 * is NULL, new zeroed ones. */
float *adsd_weights_for_dimension(float *saved, uint32_t saved_dim, uint32_t dim);

#endif

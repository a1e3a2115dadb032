/* adsd_records.c - the ADSD dataset format of the linear-regression example
 * trainers (see adsd_records.h). */
#define _GNU_SOURCE
#include "adsd_records.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer_common.h"

void adsd_accept_header(struct adsd_dataset *data, const unsigned char header[ADSD_HEADER_SIZE],
                        const char *dimension_problem, const char *path)
{
    if (memcmp(header, "ADSD", 4) != 0)
        trainer_die(3, "%s: bad magic (not an ADSD dataset)", path);
    uint32_t dim = trainer_get_u32_little_endian(header + 4);
    if (dim == 0 || dim > 65536 || (data->dim != 0 && dim != data->dim))
        trainer_die(3, "%s: %s %" PRIu32, path, dimension_problem, dim);
    data->dim = dim;
    data->count = trainer_get_u64_little_endian(header + 8);
    data->record_size = 8 + 4 * (size_t)dim + 4;
}

void adsd_check_header_against_file_size(const struct adsd_dataset *data, int fd,
                                         const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        trainer_die(1, "fstat on %s: %s", path, strerror(errno));
    uint64_t file_size = (uint64_t)st.st_size;
    if (file_size < ADSD_HEADER_SIZE || (file_size - ADSD_HEADER_SIZE) % data->record_size != 0 ||
        (file_size - ADSD_HEADER_SIZE) / data->record_size != data->count)
        trainer_die(3, "%s: header says %" PRIu64 " records of %zu bytes (+16 header) but the file has "
                       "%" PRIu64 " bytes", path, data->count, data->record_size, file_size);
}

void adsd_rewind_and_check_header_with_read(struct adsd_dataset *data, const char *path)
{
    if (lseek(data->fd, 0, SEEK_SET) != 0)
        trainer_die(1, "lseek on %s: %s", path, strerror(errno));
    unsigned char header[ADSD_HEADER_SIZE];
    bool at_end;
    if (trainer_read_full(data->fd, header, sizeof header, &at_end, path) != sizeof header)
        trainer_die(3, "%s: file shorter than its 16-byte header", path);
    adsd_accept_header(data, header, "bad or changed dimension", path);
    adsd_check_header_against_file_size(data, data->fd, path);
}

size_t adsd_read_batch_with_read(struct adsd_dataset *data, unsigned char *buffer, uint64_t batch,
                                 bool *at_end, const char *path)
{
    size_t got = trainer_read_full(data->fd, buffer, batch * data->record_size, at_end, path);
    if (got % data->record_size != 0)
        trainer_die(3, "%s: truncated record at end of file", path);
    return got / data->record_size;
}

float adsd_mean_squared_error_gradient(const float *w, float *grad, uint32_t dim,
                                       const unsigned char *records, size_t n, size_t record_size)
{
    float loss = 0.0f;
    memset(grad, 0, dim * sizeof *grad);
    for (size_t r = 0; r < n; r++) {
        const unsigned char *x = records + r * record_size + 8;
        float prediction = 0.0f;
        for (uint32_t j = 0; j < dim; j++)
            prediction += w[j] * trainer_get_f32_little_endian(x + 4 * (size_t)j);
        float error = prediction - trainer_get_f32_little_endian(x + 4 * (size_t)dim);
        loss += error * error;
        for (uint32_t j = 0; j < dim; j++)
            grad[j] += error * trainer_get_f32_little_endian(x + 4 * (size_t)j);
    }
    float scale = 2.0f / (float)n;
    for (uint32_t j = 0; j < dim; j++)
        grad[j] = grad[j] * scale;
    return loss;
}

float adsd_linear_regression_sgd_step(float *w, float *grad, uint32_t dim,
                                      const unsigned char *records, size_t n, size_t record_size,
                                      float lr)
{
    float loss = adsd_mean_squared_error_gradient(w, grad, dim, records, n, record_size);
    for (uint32_t j = 0; j < dim; j++)
        w[j] -= lr * grad[j];
    return loss;
}

void adsd_log_batch_ids(int log_fd, const unsigned char *records, size_t n, size_t record_size,
                        uint64_t epoch, uint64_t step)
{
    if (log_fd < 0)
        return;
    char *text = trainer_allocate_zeroed(n * 64 + 32);
    size_t length = 0;
    for (size_t r = 0; r < n; r++)
        length += (size_t)sprintf(text + length, "id %" PRIu64 " epoch %" PRIu64 "\n",
                                  trainer_get_u64_little_endian(records + r * record_size), epoch);
    length += (size_t)sprintf(text + length, "step %" PRIu64 "\n", step);
    trainer_write_all(log_fd, text, length, "ids log");
    free(text);
}

float *adsd_weights_for_dimension(float *saved, uint32_t saved_dim, uint32_t dim)
{
    if (saved != NULL && saved_dim != dim)
        trainer_die(3, "checkpoint dimension %" PRIu32 " does not match data dimension %" PRIu32,
                    saved_dim, dim);
    return saved != NULL ? saved : trainer_allocate_zeroed(dim * sizeof *saved);
}

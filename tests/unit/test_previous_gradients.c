/* test_previous_gradients.c - pairing each gradient piece with the same
 * piece of the previous step (runtime/previous_gradients.h): the first step
 * has no pair, a consecutive step gets |(a + b)/2|^2, a skipped step, a
 * size or type change has none, and pieces are kept by position. */
#include <criterion/criterion.h>

#include "previous_gradients.h"

Test(previous_gradients, consecutive_steps_pair_their_pieces)
{
    struct previous_gradients gradients = {0};
    const float a[3] = {1, 2, 3}, b[3] = {3, 2, 1};
    double mean_sqr;
    cr_expect(!previous_gradients_pair(&gradients, 0, a, 3, sizeof(float), 1, &mean_sqr));
    cr_expect(previous_gradients_pair(&gradients, 0, b, 3, sizeof(float), 2, &mean_sqr));
    cr_expect_eq(mean_sqr, 4 + 4 + 4, "|(a + b)/2|^2 = |(2, 2, 2)|^2");
    const double c[2] = {1, 1}, d[2] = {3, -1};
    cr_expect(!previous_gradients_pair(&gradients, 1, c, 2, sizeof(double), 2, &mean_sqr),
              "another piece has its own history");
    cr_expect(previous_gradients_pair(&gradients, 1, d, 2, sizeof(double), 3, &mean_sqr));
    cr_expect_eq(mean_sqr, 4 + 0);
    previous_gradients_free(&gradients);
}

Test(previous_gradients, a_gap_or_a_change_of_shape_has_no_pair)
{
    struct previous_gradients gradients = {0};
    const float a[2] = {1, 1};
    const double b[2] = {1, 1};
    double mean_sqr;
    previous_gradients_pair(&gradients, 0, a, 2, sizeof(float), 1, &mean_sqr);
    cr_expect(!previous_gradients_pair(&gradients, 0, a, 2, sizeof(float), 3, &mean_sqr),
              "step 2 was skipped");
    cr_expect(!previous_gradients_pair(&gradients, 0, a, 1, sizeof(float), 4, &mean_sqr),
              "another size");
    cr_expect(!previous_gradients_pair(&gradients, 0, b, 1, sizeof(double), 5, &mean_sqr),
              "another type");
    cr_expect(!previous_gradients_pair(&gradients, PREVIOUS_GRADIENTS_PIECES, a, 2,
                                       sizeof(float), 6, &mean_sqr), "beyond the kept pieces");
    previous_gradients_free(&gradients);
}

/**
 * Cohort's version, as `cohort --version` prints it. It is the `version` of `package.json`;
 * `test/cli.test.ts` checks that the two agree.
 *
 * @since 0.1.0
 * @category cli
 */
export const version = "0.1.0"

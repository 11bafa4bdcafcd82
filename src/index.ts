/**
 * Cohort's library entry point.
 *
 * @since 0.1.0
 */
export * as Runtime from "./transport/runtime/detect.ts"

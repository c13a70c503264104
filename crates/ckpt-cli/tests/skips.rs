//! The rule of the skip helpers (`common::skip` and friends): a test that
//! cannot run reports a skip, and fails instead only under `CI=true`, where
//! `.ci/run` has installed every prerequisite.

mod common;

use common::*;

#[test]
fn a_skip_fails_only_under_ci_true() {
    assert!(skip_fails(Some("true")));
    assert!(!skip_fails(None));
    assert!(!skip_fails(Some("")));
    assert!(!skip_fails(Some("false")));
}

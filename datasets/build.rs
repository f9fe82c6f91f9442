//! Links the crate against libtorch.

fn main() {
    stratlab_build::link_libtorch();
}

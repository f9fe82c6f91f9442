//! Links the crate against libtorch and embeds the build's provenance (commit, toolchain).

fn main() {
    stratlab_build::link_libtorch();
    stratlab_build::embed_provenance();
}

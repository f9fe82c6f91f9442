fn main() {
    stratlab_build::link_libtorch();
    stratlab_build::embed_provenance();
}

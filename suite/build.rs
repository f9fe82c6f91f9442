fn main() {
    stratlab_build::link_libtorch();
}

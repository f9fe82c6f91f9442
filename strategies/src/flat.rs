//! Whole groups of tensors through one flat buffer, as collectives and point-to-point
//! messages need them: packed into a buffer allocated once and kept, unpacked back.
//!
//! Kept, not allocated per step: a buffer past malloc's mmap threshold (32 MiB, so most
//! fused buckets and whole-model messages) takes fresh pages from the kernel every time it
//! is allocated, which cost VGG-11's 37 MB about 25 ms a buffer here against about 7 ms for
//! a copy into memory already touched.

use tch::{Device, Kind, Tensor};

/// A zeroed flat buffer on `device` with room for every element of `parts` and `extra`
/// more, in their type (float32 where there are none).
pub fn buffer_for<'a>(parts: impl IntoIterator<Item = &'a Tensor>, extra: usize, device: Device) -> Tensor {
    let (mut numel, mut kind) = (extra, None);
    for part in parts {
        numel += part.numel();
        kind.get_or_insert(part.kind());
    }
    Tensor::zeros([numel as i64], (kind.unwrap_or(Kind::Float), device))
}

/// Copies every tensor of `parts`, flattened and in order, into the start of `flat`.
pub fn pack(parts: impl IntoIterator<Item = Tensor>, flat: &Tensor) {
    tch::no_grad(|| {
        let mut offset = 0;
        for part in parts {
            let numel = part.numel() as i64;
            flat.narrow(0, offset, numel).copy_(&part.reshape([-1]));
            offset += numel;
        }
    });
}

/// Copies each slice of `flat`, in order, into the tensor of `parts` it belongs to.
pub fn unpack(flat: &Tensor, parts: impl IntoIterator<Item = Tensor>) {
    tch::no_grad(|| {
        let mut offset = 0;
        for mut part in parts {
            let numel = part.numel() as i64;
            part.copy_(&flat.narrow(0, offset, numel).view_as(&part));
            offset += numel;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacking_what_was_packed_gives_every_tensor_back_in_place() {
        let parts = [Tensor::randn([2, 3], (Kind::Float, Device::Cpu)), Tensor::randn([4], (Kind::Float, Device::Cpu))];
        let flat = buffer_for(&parts, 1, Device::Cpu);
        assert_eq!((flat.numel(), flat.kind()), (11, Kind::Float));
        pack(parts.iter().map(Tensor::shallow_clone), &flat);
        assert_eq!(flat.narrow(0, 6, 4), parts[1]);
        assert_eq!(flat.double_value(&[10]), 0.0, "what follows the parts is left alone");
        let targets =
            [Tensor::zeros([2, 3], (Kind::Float, Device::Cpu)), Tensor::zeros([4], (Kind::Float, Device::Cpu))];
        unpack(&flat, targets.iter().map(Tensor::shallow_clone));
        assert_eq!(targets[0], parts[0]);
        assert_eq!(targets[1], parts[1]);
    }
}

//! Which NVML boards a trial's CUDA ordinals are.
//!
//! CUDA and NVML number boards independently: NVML by its own enumeration, CUDA by
//! `CUDA_DEVICE_ORDER` restricted and reordered by `CUDA_VISIBLE_DEVICES`. Sampling
//! `gpu{ordinal}` in NVML is right only by luck, so the mapping goes through what both
//! agree on: a board's PCI bus id and UUID.

use super::{CudaEnv, GpuSource, TelemetryError};

/// One physical board, identified the ways CUDA and NVML both understand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuBoard {
    /// Its NVML index (what `nvidia-smi` shows); the handle for every query.
    pub nvml_index: u32,
    /// Its PCI bus id, normalised (`00000000:3B:00.0`).
    pub pci_bus_id: String,
    /// Its UUID (`GPU-…`).
    pub uuid: String,
    /// Its product name.
    pub name: String,
    /// Installed memory, bytes, when NVML said.
    pub memory_total_bytes: Option<u64>,
}

/// The boards a set of CUDA ordinals are, and how sure that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardMapping {
    /// The boards, in PCI bus order, each once.
    pub boards: Vec<GpuBoard>,
    /// The mapping depended on CUDA's device order and that order was not `PCI_BUS_ID`, so
    /// bus order was assumed: right for identical boards in practice, unspecified by CUDA.
    pub order_guessed: bool,
}

/// Maps `cuda_ordinals` of a process with `env` to the boards of `source` they are.
///
/// Follows CUDA's rules for `CUDA_VISIBLE_DEVICES`: entries are integer indices (into all
/// boards in `CUDA_DEVICE_ORDER`) or UUIDs (`GPU-…`, or any prefix of one that matches a
/// single board), separated by commas; the first invalid entry (unknown, repeated,
/// negative, ambiguous) ends the list, so `"0,2,-1,1"` shows boards 0 and 2; an empty value
/// shows none. MIG instances (`MIG-…`) are rejected: NVML's board readings would describe
/// the whole board, not the instance. Exact only under `CUDA_DEVICE_ORDER=PCI_BUS_ID`; see
/// [`BoardMapping::order_guessed`].
///
/// Errors when a board's identity cannot be read, or an ordinal is past the visible list.
pub fn map_cuda_ordinals(
    source: &dyn GpuSource,
    cuda_ordinals: &[usize],
    env: &CudaEnv,
) -> Result<BoardMapping, TelemetryError> {
    let count = source.device_count().map_err(TelemetryError::DeviceCount)?;
    let mut all = Vec::with_capacity(count as usize);
    for index in 0..count {
        let query = |what| move |error| TelemetryError::Query { index, what, error };
        let raw_bus_id = source.pci_bus_id(index).map_err(query("PCI bus id"))?;
        let Some((pci_bus_id, bus_key)) = normalize_pci_bus_id(&raw_bus_id) else {
            return Err(TelemetryError::BadPciBusId { index, bus_id: raw_bus_id });
        };
        let uuid = source.uuid(index).map_err(query("UUID"))?;
        let name = source.name(index).map_err(query("name"))?;
        all.push((bus_key, GpuBoard { nvml_index: index, pci_bus_id, uuid, name, memory_total_bytes: None }));
    }
    // CUDA's PCI_BUS_ID order is (domain, bus, device, function); NVML's index order
    // usually agrees, but NVML does not promise it, so sort rather than trust it.
    all.sort_by_key(|(bus_key, _)| *bus_key);
    let all: Vec<GpuBoard> = all.into_iter().map(|(_, board)| board).collect();

    let (visible, by_index) = visible_positions(&all, env.visible_devices.as_deref())?;
    let mut positions = Vec::with_capacity(cuda_ordinals.len());
    for &ordinal in cuda_ordinals {
        let Some(&position) = visible.get(ordinal) else {
            return Err(TelemetryError::OrdinalNotVisible {
                ordinal,
                visible: visible.len(),
                cuda_visible_devices: env.visible_devices.clone(),
            });
        };
        positions.push(position);
    }
    positions.sort_unstable();
    positions.dedup();
    let boards = positions
        .into_iter()
        .map(|position| {
            let mut board = all[position].clone();
            board.memory_total_bytes = source.memory(board.nvml_index).ok().map(|memory| memory.total_bytes);
            board
        })
        .collect();
    // Only integer entries (or an unset list) count in CUDA's order, and with one board
    // every order is the same.
    let order_guessed = by_index && all.len() > 1 && !env.is_pci_bus_order();
    Ok(BoardMapping { boards, order_guessed })
}

/// Positions in `all` (bus order) of the boards CUDA shows, in CUDA's ordinal order, and
/// whether any of them was chosen by index (so CUDA's device order mattered).
fn visible_positions(all: &[GpuBoard], visible_devices: Option<&str>) -> Result<(Vec<usize>, bool), TelemetryError> {
    let Some(list) = visible_devices else {
        return Ok(((0..all.len()).collect(), true));
    };
    let mut visible: Vec<usize> = Vec::new();
    let mut by_index = false;
    if list.trim().is_empty() {
        return Ok((visible, false));
    }
    for entry in list.split(',').map(str::trim) {
        let upper = entry.to_ascii_uppercase();
        if upper.starts_with("MIG-") {
            return Err(TelemetryError::MigUnsupported { entry: entry.to_owned() });
        }
        let position = if let Ok(index) = entry.parse::<i64>() {
            by_index = true;
            usize::try_from(index).ok().filter(|&i| i < all.len())
        } else if upper.starts_with("GPU-") {
            let mut matches = all.iter().enumerate().filter(|(_, b)| b.uuid.to_ascii_uppercase().starts_with(&upper));
            match (matches.next(), matches.next()) {
                (Some((position, _)), None) => Some(position),
                _ => None,
            }
        } else {
            None
        };
        match position {
            Some(position) if !visible.contains(&position) => visible.push(position),
            // CUDA stops at the first entry it cannot use and shows the boards before it.
            _ => break,
        }
    }
    Ok((visible, by_index))
}

/// Normalises a PCI bus id to NVML's form, `DDDDDDDD:BB:DD.F` in upper-case hex, and its
/// sort key (domain, bus, device, function); `None` if it is not one.
///
/// Accepts NVML's form, the legacy four-digit domain (`0000:3b:00.0`, what CUDA's
/// `cudaDeviceGetPCIBusId` and `lspci -D` print) and any case, so ids from different tools
/// compare equal.
pub fn normalize_pci_bus_id(bus_id: &str) -> Option<(String, (u32, u32, u32, u32))> {
    let bus_id = bus_id.trim().trim_end_matches('\0');
    let (domain, rest) = bus_id.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |field: &str, digits: usize| {
        (!field.is_empty() && field.len() <= digits && field.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(field, 16).ok())
            .flatten()
    };
    let key = (hex(domain, 8)?, hex(bus, 2)?, hex(device, 2)?, hex(function, 1)?);
    Some((format!("{:08X}:{:02X}:{:02X}.{:X}", key.0, key.1, key.2, key.3), key))
}

#[cfg(test)]
mod tests {
    use super::super::{ScriptedBoard, ScriptedSource};
    use super::*;

    /// Four boards whose NVML indices are not in bus order: bus order is
    /// index 2 (0x1A), index 0 (0x3B), index 3 (0x5E), index 1 (0xAF).
    fn four_boards() -> ScriptedSource {
        ScriptedSource::new(vec![
            ScriptedBoard::new("00000000:3B:00.0", "GPU-bbbb1111-0000-0000-0000-000000000000"),
            ScriptedBoard::new("00000000:af:00.0", "GPU-dddd1111-0000-0000-0000-000000000000"),
            ScriptedBoard::new("0000:1a:00.0", "GPU-aaaa1111-0000-0000-0000-000000000000"),
            ScriptedBoard::new("00000000:5E:00.0", "GPU-cccc1111-0000-0000-0000-000000000000"),
        ])
    }

    fn env(visible: Option<&str>) -> CudaEnv {
        CudaEnv { visible_devices: visible.map(str::to_owned), device_order: Some("PCI_BUS_ID".into()) }
    }

    /// The NVML indices `ordinals` map to, or the error's text.
    fn mapped(ordinals: &[usize], env: &CudaEnv) -> Result<Vec<u32>, String> {
        map_cuda_ordinals(&four_boards(), ordinals, env)
            .map(|mapping| mapping.boards.iter().map(|board| board.nvml_index).collect())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn without_visible_devices_ordinals_count_in_bus_order() {
        assert_eq!(mapped(&[0], &env(None)), Ok(vec![2]));
        assert_eq!(mapped(&[1], &env(None)), Ok(vec![0]));
        // Result in bus order, each board once.
        assert_eq!(mapped(&[3, 0, 3], &env(None)), Ok(vec![2, 1]));
    }

    #[test]
    fn visible_devices_reorder_and_restrict() {
        // "2,0": ordinal 0 is the board with the 3rd-lowest bus id (NVML index 3).
        assert_eq!(mapped(&[0], &env(Some("2,0"))), Ok(vec![3]));
        assert_eq!(mapped(&[1], &env(Some("2,0"))), Ok(vec![2]));
        assert_eq!(mapped(&[0, 1], &env(Some(" 2 , 0 "))), Ok(vec![2, 3]));
        let error = mapped(&[2], &env(Some("2,0"))).unwrap_err();
        assert!(error.contains("ordinal 2") && error.contains("2 visible"), "{error}");
    }

    #[test]
    fn uuids_and_unique_uuid_prefixes_name_boards() {
        let full = "GPU-dddd1111-0000-0000-0000-000000000000";
        assert_eq!(mapped(&[0], &env(Some(full))), Ok(vec![1]));
        assert_eq!(mapped(&[0, 1], &env(Some("gpu-CCCC,GPU-aaaa"))), Ok(vec![2, 3]));
        // "GPU-" alone matches all four boards: ambiguous, so the list ends before it.
        assert!(mapped(&[0], &env(Some("GPU-"))).is_err());
    }

    #[test]
    fn the_first_invalid_entry_truncates_the_list() {
        assert_eq!(mapped(&[1], &env(Some("0,2,-1,1"))), Ok(vec![3]));
        assert!(mapped(&[2], &env(Some("0,2,-1,1"))).is_err());
        // Out of range, repeated, unparsable and empty entries end the list too.
        for list in ["1,7,0", "1,1,0", "1,x,0", "1,,0", "1,bbbb1111,0"] {
            assert_eq!(mapped(&[0], &env(Some(list))), Ok(vec![0]), "{list}");
            assert!(mapped(&[1], &env(Some(list))).is_err(), "{list}");
        }
        assert!(mapped(&[0], &env(Some("-1"))).is_err());
    }

    #[test]
    fn an_empty_list_shows_no_board_and_mig_is_refused() {
        assert!(mapped(&[0], &env(Some(""))).unwrap_err().contains("0 visible"));
        let error = mapped(&[0], &env(Some("MIG-GPU-aaaa1111/1/0"))).unwrap_err();
        assert!(error.contains("MIG"), "{error}");
    }

    #[test]
    fn the_order_is_flagged_as_guessed_only_where_it_matters() {
        let unset = |visible: Option<&str>| CudaEnv { visible_devices: visible.map(str::to_owned), device_order: None };
        let guessed = |env: &CudaEnv| map_cuda_ordinals(&four_boards(), &[0], env).map(|m| m.order_guessed);
        assert!(matches!(guessed(&unset(None)), Ok(true)));
        assert!(matches!(guessed(&unset(Some("1"))), Ok(true)));
        assert!(matches!(guessed(&unset(Some("GPU-aaaa"))), Ok(false)));
        assert!(matches!(guessed(&env(None)), Ok(false)));
        let one = ScriptedSource::new(vec![ScriptedBoard::new("0000:01:00.0", "GPU-1")]);
        assert!(!map_cuda_ordinals(&one, &[0], &unset(None)).map(|m| m.order_guessed).unwrap_or(true));
    }

    #[test]
    fn boards_carry_their_identity() {
        let mapping = map_cuda_ordinals(&four_boards(), &[0], &env(None)).expect("maps");
        let board = &mapping.boards[0];
        assert_eq!(board.pci_bus_id, "00000000:1A:00.0");
        assert_eq!(board.uuid, "GPU-aaaa1111-0000-0000-0000-000000000000");
        assert_eq!(board.memory_total_bytes, Some(80 << 30));
    }

    #[test]
    fn bus_ids_normalise_and_garbage_is_refused() {
        let normal = |id| normalize_pci_bus_id(id).map(|(text, _)| text);
        assert_eq!(normal("0000:3b:00.0").as_deref(), Some("00000000:3B:00.0"));
        assert_eq!(normal("00000001:AF:1f.7").as_deref(), Some("00000001:AF:1F.7"));
        for bad in ["", "3b:00.0", "0000:3b:00", "0000:3g:00.0", "0000:3b:00.10", "000000000:3b:00.0"] {
            assert_eq!(normal(bad), None, "{bad}");
        }
        let source = ScriptedSource::new(vec![ScriptedBoard::new("not a bus id", "GPU-x")]);
        assert!(map_cuda_ordinals(&source, &[0], &env(None)).is_err());
    }
}

//! Action lists in `torch.distributed.pipelining`'s text form: one action per item, the
//! stage index, the pass's letter (`F`, `B`, or a split backward's `I` and `W`), then the micro-batch (`0F0,4B1`), so a rank's order here can be
//! compared with, or fed to, `_PipelineScheduleRuntime`.

use super::action::{Action, Pass};

/// `actions` as PyTorch writes a rank's compute actions, comma-separated.
pub fn pytorch_order(actions: &[Action]) -> String {
    let items: Vec<String> = actions
        .iter()
        .map(|action| format!("{}{}{}", action.stage, action.pass.letter(), action.micro_batch))
        .collect();
    items.join(",")
}

/// Why an item of a PyTorch order was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PyTorch action {item:?} is not <stage><F|B|I|W><micro-batch> (such as 0F1, 4B0 or 2W3)")]
pub struct PytorchOrderError {
    /// The item as written.
    pub item: String,
}

impl Action {
    /// One compute action in PyTorch's form (`4B1`).
    pub fn from_pytorch(item: &str) -> Result<Action, PytorchOrderError> {
        let error = || PytorchOrderError { item: item.to_owned() };
        let passes = [Pass::Forward, Pass::Backward, Pass::InputBackward, Pass::WeightBackward];
        let at = item.find(|c| passes.iter().any(|pass| pass.letter() == c)).ok_or_else(error)?;
        let pass = *passes.iter().find(|pass| item[at..].starts_with(pass.letter())).ok_or_else(error)?;
        let stage = item[..at].parse().map_err(|_| error())?;
        let micro_batch = item[at + 1..].parse().map_err(|_| error())?;
        Ok(Action { pass, stage, micro_batch })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_round_trip_and_bad_items_are_named() {
        let actions = vec![Action::forward(0, 1), Action::backward(4, 12)];
        let text = pytorch_order(&actions);
        assert_eq!(text, "0F1,4B12");
        let read: Vec<Action> = text.split(',').map(Action::from_pytorch).collect::<Result<_, _>>().unwrap();
        assert_eq!(read, actions);
        assert_eq!(Action::from_pytorch("0W1").unwrap(), Action::new(Pass::WeightBackward, 0, 1));
        assert_eq!(Action::from_pytorch("0X1").unwrap_err().item, "0X1");
        assert!(Action::from_pytorch("F1").is_err());
    }
}

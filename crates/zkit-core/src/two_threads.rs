//! A two-stage pipeline over two threads, for the sequential work of a recovery: one thread
//! produces items (reads and checks them), the calling one consumes them in order (puts them
//! into the state), handed over in batches through a bounded channel.

/// Batches in the channel at most: bounds what the producing side reads ahead.
const IN_FLIGHT: usize = 8;

/// Runs `produce` on a second thread and `consume` on this one, on every item `produce`
/// emits, in order, handed over `batch` at a time.
///
/// `produce` calls `emit` with each item; `emit` returns false once the consuming side has
/// stopped (at an error), and `produce` should then return. The result is the first error in
/// the items' order, as one thread doing both would report it: the items emitted before a
/// production error are consumed first (the consuming side may fail on one of them), and a
/// consumption error stops the production.
///
/// # Errors
/// The first error of either side, in that order.
pub fn run<T: Send, E: Send>(
    batch: usize,
    produce: impl FnOnce(&mut dyn FnMut(T) -> bool) -> Result<(), E> + Send,
    consume: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    let batch = batch.max(1);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<T>>(IN_FLIGHT);
        let producer = scope.spawn(move || {
            let mut pending = Vec::with_capacity(batch);
            let mut open = true;
            let produced = produce(&mut |item| {
                pending.push(item);
                if pending.len() >= batch {
                    let full = std::mem::replace(&mut pending, Vec::with_capacity(batch));
                    open = tx.send(full).is_ok();
                }
                open
            });
            if open {
                // What came before an error still goes in.
                let _ = tx.send(pending);
            }
            produced
        });
        // Takes the receiver: when it returns (at an error too), the channel closes, so the
        // producing thread is never left blocked on a full channel.
        let consumed = consume_all(rx, consume);
        let produced = producer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        consumed?;
        produced
    })
}

fn consume_all<T, E>(
    rx: std::sync::mpsc::Receiver<Vec<T>>,
    mut consume: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    for batch in rx {
        for item in batch {
            consume(item)?;
        }
    }
    Ok(())
}

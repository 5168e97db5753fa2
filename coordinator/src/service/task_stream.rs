//! A stream fed by a task, for answers that go on (`platter watch`, a console page's
//! `/events`): the task gets the sending half of a small channel, and is stopped as soon
//! as whoever reads the stream drops it, not at its next send.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// The stream of what `f`'s task sends.
pub fn task_stream<T, F, Fut>(f: F) -> Pin<Box<dyn Stream<Item = T> + Send>>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let abort = tokio::spawn(f(tx)).abort_handle();
    Box::pin(AbortOnDrop {
        inner: tokio_stream::wrappers::ReceiverStream::new(rx),
        abort,
    })
}

/// The stream, aborting its feeding task when dropped.
struct AbortOnDrop<S> {
    inner: S,
    abort: tokio::task::AbortHandle,
}

impl<S> Drop for AbortOnDrop<S> {
    fn drop(&mut self) {
        self.abort.abort();
    }
}

impl<S: Stream + Unpin> Stream for AbortOnDrop<S> {
    type Item = S::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

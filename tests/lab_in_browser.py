"""JupyterLab in headless Chromium, driven as a student drives it: a server on a scratch folder,
a page per notebook, Run All, and the widgets operated with the mouse and the keyboard.

Cells and widgets are found by what they show, never by their position, so notebooks can change
under the browser test. The helpers raise ``AssertionError`` with what the page showed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# JupyterLab and the widgets can be slow to start on a loaded 2-core machine; waits are bounded.
SERVER_START = 90.0
KERNEL_START = 90.0
RUN_ALL = 300.0  # the slowest solved notebook runs in about 15 s here
WIDGET_UPDATE = 60.0  # one change of a widget: a launch of 4 ranks and a redrawn figure

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Chromium as root in a container, with no network but loopback: no sandbox, no calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> str | None:
    """The Chromium to drive: $CHROMIUM if set (None if it is not a program), else the first one
    on PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    return next((path for name in CHROMIUM_CANDIDATES if (path := shutil.which(name))), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server: its address, token and the folder it serves."""

    url: str
    token: str
    root: Path
    log: Path

    def notebook_url(self, relative: str) -> str:
        # A workspace of its own per page, reset: no panel restored from an earlier page.
        workspace = secrets.token_hex(4)
        return f"{self.url}/lab/workspaces/{workspace}/tree/{relative}?reset&token={self.token}"


@contextmanager
def jupyterlab(root: Path, home: Path) -> Iterator[Lab]:
    """JupyterLab serving ``root``, with its configuration, data and runtime folders under
    ``home`` so that nothing of the user's (settings, kernels, workspaces) changes what it shows."""
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    for variable, folder in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
    ):
        (home / folder).mkdir(parents=True, exist_ok=True)
        env[variable] = str(home / folder)
    env.pop("JUPYTER_PATH", None)
    # JupyterLab's first start asks, in a pop-up, whether to fetch its news; answered "no" here.
    notification = (
        home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    )
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    log = home / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
        # No calls to the internet: this machine may have none, and they are not the course's.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    with log.open("w") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, server, log)
        yield Lab(f"http://127.0.0.1:{port}", token, root, log)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_for_port(port: int, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.25)
    raise AssertionError(f"JupyterLab did not listen within {SERVER_START:.0f} s:\n{log.read_text()[-3000:]}")


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """``condition()``'s first true value, polled until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@dataclass
class PageProblems:
    """What the page reported that a student would see as broken: console errors, uncaught
    exceptions."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page) -> None:
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))


# -- the notebook panel ---------------------------------------------------------------------------


def kernel_status(page) -> str:
    """The notebook toolbar's kernel status: "idle", "busy", "starting", ... ("" before it shows)."""
    return page.evaluate(
        """() => {
            const indicator = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) '
                + '.jp-Notebook-ExecutionIndicator');
            return indicator ? (indicator.getAttribute('data-status') || '') : '';
        }"""
    )


def open_notebook(page, lab: Lab, relative: str) -> None:
    """Open a notebook in a fresh workspace and wait until its kernel is connected and idle."""
    page.goto(lab.notebook_url(relative))
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=KERNEL_START * 1000)
    # The kernel first shows "idle" before it is even started; it is ready once it has gone
    # through starting and reports idle with its language known (the panel asks for kernel_info).
    wait_until(
        lambda: kernel_status(page) == "idle" and page.evaluate(_KERNEL_CONNECTED),
        KERNEL_START,
        f"{relative}'s kernel to start",
    )


# The kernel name in the toolbar is shown only once the session has a kernel.
_KERNEL_CONNECTED = """() => {
    const name = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-KernelName');
    return !!name && !/No Kernel|Connecting/i.test(name.textContent);
}"""


def is_marked_modified(page) -> bool:
    """Whether the notebook's tab shows the unsaved-changes dot."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current')]
            .some(tab => tab.classList.contains('jp-mod-dirty'))"""
    )


def run_command(page, label: str) -> None:
    """Run a JupyterLab command from its menu, by the menu item's label (e.g. "Run All Cells")."""
    menus = {"Run All Cells": "Run", "Save Notebook": "File", "Shut Down Kernel": "Kernel"}
    page.click(f".lm-MenuBar-itemLabel:text-is('{menus[label]}')")
    page.click(f".lm-Menu-itemLabel:text-is('{label}')")


def run_all(page) -> None:
    """Run All Cells, and wait until no cell is running or waiting to run.

    Run All has started only once a cell's prompt shows "[*]" or a number: the kernel being busy
    is not enough, as the widgets' manager keeps it busy a moment after it connects. A Run All
    that did not start (its menu item clicked before the notebook was the current panel) is
    asked for once more; a kernel that dies on the way is reported with JupyterLab's dialog."""
    for attempt in (1, 2):
        run_command(page, "Run All Cells")
        try:
            wait_until(lambda: page.evaluate(_STARTED_CELLS) > 0, 30, "Run All to start a cell")
            break
        except AssertionError:
            if attempt == 2:
                raise AssertionError(
                    f"no cell started after Run All Cells, twice; kernel {kernel_status(page)!r}"
                    f"{dialog_text(page)}"
                ) from None
    # Finished: no "[*]" prompt, the kernel idle, and both still so a moment later.
    settled = 0

    def finished() -> bool:
        nonlocal settled
        if "died" in dialog_text(page) or kernel_status(page) in ("dead", "restarting"):
            raise AssertionError(f"the kernel died during Run All{dialog_text(page)}")
        quiet = page.evaluate(_RUNNING_CELLS) == 0 and kernel_status(page) == "idle"
        settled = settled + 1 if quiet else 0
        return settled >= 4

    wait_until(finished, RUN_ALL, "Run All to finish", interval=0.5)


_RUNNING_CELLS = """() => [...document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
    .filter(prompt => prompt.textContent.includes('*')).length"""

# Cells that are running, waiting to run or have run: "[*]" or "[12]" (the solved copies are
# saved with no outputs, so none shows a number before Run All).
_STARTED_CELLS = """() => [...document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
    .filter(prompt => /\\[(\\*|\\d+)\\]/.test(prompt.textContent)).length"""


def dialog_text(page) -> str:
    """What an open JupyterLab dialog says ("Kernel Restarting ... appears to have died"), on a
    new line, or "" when none is open."""
    text = page.evaluate(
        "() => [...document.querySelectorAll('.jp-Dialog')].map(d => d.textContent.trim()).join(' | ')"
    )
    return f"\nthe page shows a dialog: {text[:500]}" if text else ""


def save(page) -> None:
    run_command(page, "Save Notebook")
    wait_until(lambda: not is_marked_modified(page), 30, "the notebook to be saved")


def widget_errors(page) -> list[str]:
    """Every "Error displaying widget" (or other widget failure) the notebook shows, and every
    exception that a widget's callback showed in its output area instead of its picture."""
    return page.evaluate(
        """() => {
            const panel = '.jp-NotebookPanel:not(.lm-mod-hidden) ';
            const broken = [...document.querySelectorAll(panel + '.jp-OutputArea-output')]
                .map(o => o.textContent)
                .filter(t => /Error displaying widget|model not found|Failed to load model class/i.test(t))
                .map(t => t.trim().slice(0, 300));
            const raised = [...document.querySelectorAll(panel + '.widget-output .jp-OutputArea-output')]
                .map(o => o.textContent)
                .filter(t => t.includes('Traceback (most recent call last)'))
                .map(t => 'a widget showed an exception: ' + t.trim().split('\\n').slice(0, 8).join('\\n')
                    + ' ... ' + t.trim().split('\\n').slice(-3).join('\\n'));
            return [...broken, ...raised];
        }"""
    )


# -- widgets -------------------------------------------------------------------------------------

# The widget views in an output, from the outermost; each with the controls a student can operate.
_WIDGET_ROOTS = """() => {
    const outputs = [...document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')];
    return outputs.filter(o => o.querySelector('.jupyter-widgets')).length;
}"""


def widget_outputs(page):
    """The cell outputs that hold a widget view, in notebook order (as Playwright locators)."""
    outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output")
    return [o for o in outputs.all() if o.locator(".jupyter-widgets").count()]


def shown(root) -> str:
    """What an explorer shows, in its output widgets (or, with none, in all of it): its pictures
    (an <img>'s src is the PNG itself) and its text. Not the HTML around them, which JupyterLab
    restyles as outputs are cleared and redrawn."""
    return root.evaluate(
        """root => {
            const outputs = [...root.querySelectorAll('.widget-output')];
            return JSON.stringify((outputs.length ? outputs : [root]).map(o => ({
                pictures: [...o.querySelectorAll('img')].map(img => img.getAttribute('src')),
                drawings: [...o.querySelectorAll('svg')].map(svg => svg.outerHTML),
                text: o.textContent,
            })));
        }"""
    )


def describe(control) -> str:
    """A control's label, as the student reads it."""
    return control.evaluate(
        """c => {
            const label = c.querySelector('.widget-label, .widget-label-basic');
            if (label && label.textContent.trim()) return label.textContent.trim().slice(0, 40);
            const buttons = [...c.querySelectorAll('button')].map(b => b.textContent.trim());
            if (buttons.length > 1) return buttons.join('/').slice(0, 40);
            return c.textContent.trim().slice(0, 40) || c.className;
        }"""
    )


def settle(page, root, before: str, timeout: float = WIDGET_UPDATE, quiet_for: float = 3.0) -> str:
    """What ``root`` shows once the kernel has handled a change: the new display as soon as it
    differs from ``before`` and has stayed the same for a moment with the kernel idle; ``before``
    if nothing changed while the kernel stayed idle for ``quiet_for`` seconds."""
    deadline = time.monotonic() + timeout
    last, stable_since = None, time.monotonic()
    while time.monotonic() < deadline:
        now, idle = shown(root), kernel_status(page) == "idle"
        if now != last or not idle:
            last, stable_since = now, time.monotonic()
        steady = time.monotonic() - stable_since
        if idle and ((now != before and steady >= 0.75) or (now == before and steady >= quiet_for)):
            return now
        time.sleep(0.25)
    raise AssertionError(f"the widget's display was still changing after {timeout:.0f} s")


# A control of each kind, as ipywidgets 7 and 8 draw them, and what stands for its value.
CONTROLS = {
    "slider": ".widget-slider",
    "dropdown": ".widget-dropdown",
    "toggle buttons": ".widget-toggle-buttons",
    "button": "button.widget-button",
    "checkbox": ".widget-checkbox",
}
_HANDLE = ".noUi-handle, .ui-slider-handle"


def controls(root) -> list[tuple[str, object]]:
    """(kind, locator) of every control inside an explorer, in the order the student sees them."""
    found = []
    for kind, selector in CONTROLS.items():
        found += [(kind, c) for c in root.locator(selector).all()]
    return sorted(found, key=lambda kc: kc[1].evaluate(_DOCUMENT_ORDER))


# Comparable positions in the document: how many elements come before this one.
_DOCUMENT_ORDER = """e => {
    let n = 0; const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT);
    while (walker.nextNode() && walker.currentNode !== e) n++;
    return n;
}"""


def is_disabled(control) -> bool:
    return control.evaluate(
        """c => c.matches('[disabled], .mod-disabled') || !!c.querySelector('[disabled], .mod-disabled')"""
    )


def value_of(kind: str, control) -> str:
    """What the control shows as its value: a slider's readout, the selected option, the pressed
    toggle, a checkbox's tick."""
    if kind == "slider":
        return control.locator(".widget-readout").evaluate("r => r.value ?? r.textContent").strip()
    if kind == "dropdown":
        return control.locator("select").evaluate("s => s.options[s.selectedIndex].text")
    if kind == "toggle buttons":
        return control.locator("button.mod-active").evaluate("b => b.textContent").strip()
    if kind == "checkbox":
        return str(control.locator("input").is_checked())
    return ""


def choices(kind: str, control) -> list[str]:
    """The values a dropdown or toggle buttons offer."""
    if kind == "dropdown":
        return control.locator("select option").evaluate_all("os => os.map(o => o.text)")
    return control.locator("button").evaluate_all("bs => bs.map(b => b.textContent.trim())")


def choose(kind: str, control, label: str) -> None:
    """Pick a dropdown's option or press a toggle button, as a student would."""
    if kind == "dropdown":
        control.locator("select").select_option(label=label)
    else:
        control.locator("button", has_text=label).first.click()


def set_readout(control, text: str) -> None:
    """Type a value into a slider's readout and press Enter."""
    readout = control.locator(".widget-readout")
    readout.click()
    readout.press("Control+a")
    readout.type(text)
    readout.press("Enter")


@dataclass
class Operated:
    """What operating one control did: its label, and the values that changed the display."""

    label: str
    kind: str
    shown_values: list[str]


def operate(page, root, kind: str, control) -> Operated:
    """Operate one control and check the explorer's display: every value tried shows a new
    picture, and going back to the first value shows the first picture again, exactly (what is
    shown follows the control; nothing stale or out of order)."""
    label = describe(control)
    control.scroll_into_view_if_needed()
    assert not widget_errors(page), f"before operating {label}: {widget_errors(page)}"
    first_value, first_shown = value_of(kind, control), shown(root)
    tried: list[str] = []
    if kind == "slider":
        handle = control.locator(_HANDLE).first
        # One step each way first, then bigger ones: one step may not change what is drawn.
        for key, back in (
            ("ArrowRight", "ArrowLeft"),
            ("ArrowLeft", "ArrowRight"),
            ("End", None),
            ("Home", None),
        ):
            before = shown(root)
            handle.focus()
            handle.press(key)
            value = value_of(kind, control)
            if value == first_value:
                continue  # at that end already
            now = settle(page, root, before)
            if now != before:
                tried.append(value)
                last_shown = now
                if back:
                    handle.press(back)
                break
        if value_of(kind, control) != first_value:
            set_readout(control, first_value)
    elif kind in ("dropdown", "toggle buttons"):
        before = last_shown = first_shown
        for option in choices(kind, control):
            if option == first_value:
                continue
            choose(kind, control, option)
            now = settle(page, root, before)
            assert now != before, f"{label}: choosing {option!r} left the display as it was"
            tried.append(option)
            before = last_shown = now
        choose(kind, control, first_value)
    elif kind == "checkbox":
        control.locator("input").click()
        now = settle(page, root, first_shown)
        assert now != first_shown, f"{label}: ticking it left the display as it was"
        tried.append(value_of(kind, control))
        last_shown = now
        control.locator("input").click()
    else:  # a button: each press does something, nothing to go back to
        control.click()
        now = settle(page, root, first_shown)
        assert now != first_shown, f"{label}: pressing it left the display as it was"
        assert not widget_errors(page), f"after pressing {label}: {widget_errors(page)}"
        return Operated(label, kind, ["pressed"])
    assert tried, f"{label} ({kind}): no value it can take changed the display"
    final = settle(page, root, last_shown)
    assert not widget_errors(page), f"after operating {label}: {widget_errors(page)}"
    assert value_of(kind, control) == first_value, f"{label}: could not set it back to {first_value!r}"
    assert final == first_shown, (
        f"{label}: back at {first_value!r}, the display is not what it showed for {first_value!r} at "
        f"first; {difference(first_shown, final)}"
    )
    return Operated(label, kind, tried)


def operate_every_control(page, root) -> list[Operated]:
    """Operate each control of an explorer. A control that starts disabled (a root slider that
    only some choices use) is operated once a choice of a dropdown or toggle enables it."""
    done: list[Operated] = []
    waiting = []
    for kind, control in controls(root):
        if is_disabled(control):
            waiting.append((kind, control))
        else:
            done.append(operate(page, root, kind, control))
    for chooser_kind, chooser in [kc for kc in controls(root) if kc[0] in ("dropdown", "toggle buttons")]:
        if not waiting:
            break
        first = value_of(chooser_kind, chooser)
        for option in choices(chooser_kind, chooser):
            enabled = [kc for kc in waiting if not is_disabled(kc[1])]
            for kind, control in enabled:
                done.append(operate(page, root, kind, control))
                waiting.remove((kind, control))
            if not waiting:
                break
            choose(chooser_kind, chooser, option)
            settle(page, root, shown(root))
        if value_of(chooser_kind, chooser) != first:
            choose(chooser_kind, chooser, first)
            settle(page, root, shown(root))
    assert not waiting, f"never enabled by any choice: {[describe(c) for _, c in waiting]}"
    return done


def difference(first: str, then: str) -> str:
    """Where two displays first differ, with a little context around it."""
    at = next(
        (i for i, (a, b) in enumerate(zip(first, then, strict=False)) if a != b), min(len(first), len(then))
    )
    return (
        f"first ({len(first)} characters) ...{first[max(0, at - 80) : at + 80]!r}... "
        f"now ({len(then)} characters) ...{then[max(0, at - 80) : at + 80]!r}..."
    )

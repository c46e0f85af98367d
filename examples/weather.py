"""Example tools: run `toolkeeper schema examples/weather.py --format anthropic`."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from toolkeeper import HitlMode, ToolRisk, tool


class Units(StrEnum):
    METRIC = "metric"
    IMPERIAL = "imperial"


class Forecast(BaseModel):
    city: str
    temperature: float
    summary: str


@tool(tags={"weather", "network"}, category="research")
def get_forecast(city: str, days: int = 1, units: Units = Units.METRIC) -> Forecast:
    """Get the weather forecast for a city.

    Args:
        city: City name, e.g. "Lisbon".
        days: How many days ahead (1 = tomorrow).
        units: Measurement system of the temperatures.
    """
    return Forecast(city=city, temperature=21.5 if units is Units.METRIC else 70.7,
                    summary=f"sunny for {days} day(s)")


class Alert(BaseModel):
    region: str = Field(description="Region code such as 'PT-11'.")
    level: Literal["yellow", "orange", "red"]
    message: str = Field(max_length=280)


@tool(risk=ToolRisk.CRITICAL, hitl_mode=HitlMode.BLOCKING)
def broadcast_alert(alert: Alert, channels: list[str] | None = None) -> str:
    """Broadcast a weather alert (a storm, flood or heat warning) to subscribers.

    Args:
        alert: The alert to send.
        channels: Channels to use; all channels when omitted.
    """
    return f"alert for {alert.region} sent to {', '.join(channels or ['all'])}"
